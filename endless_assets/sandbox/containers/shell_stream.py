"""The exec stream of the persistent shell: Docker's multiplexed frames, and the collector that
keeps the head of a command's output up to a cap and finds its end line (see shell.py)."""

from __future__ import annotations

import struct


class ShellGone(Exception):
    pass


class FrameDecoder:
    """Docker's multiplexed stream: 8-byte header (stream, 0, 0, 0, big-endian size) + payload.
    `feed` returns the payload of the chosen streams (1: stdout, 2: stderr) received so far."""

    def __init__(self, streams: tuple[int, ...] = (1, 2)) -> None:
        self._buf = b""
        self.streams = streams

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 8:
            size = struct.unpack(">I", self._buf[4:8])[0]
            if len(self._buf) < 8 + size:
                break
            if self._buf[0] in self.streams:
                out.append(self._buf[8 : 8 + size])
            self._buf = self._buf[8 + size :]
        return b"".join(out)


class OutputCollector:
    """Keeps the head of the output up to a cap, counts the rest, and finds the end line: the
    command's `\\n<marker> <code> <cwd><marker>\\n`, or the wrapper's `\\n<token> <code>\\n`."""

    def __init__(self, cap_chars: int, marker: bytes, exit_token: bytes) -> None:
        self.cap_bytes = cap_chars * 4 + 4  # UTF-8 worst case; trimmed to characters at the end
        self.cap_chars = cap_chars
        self.ends = ((b"\n" + marker + b" ", marker + b"\n"), (b"\n" + exit_token + b" ", b"\n"))
        self.head = bytearray()
        self.tail = b""  # unconsumed bytes that may hold a split end line
        self.total = 0
        self.done = False
        self.exited = False  # the end line is the wrapper's: the shell itself ended
        self.eof = False
        self.exit_code: int | None = None
        self.cwd = ""
        self.after_marker = b""
        self.frames = FrameDecoder()

    def feed(self, data: bytes) -> None:
        if self.done or not data:
            if self.done:
                self.after_marker += data
            return
        buf = self.tail + data
        found = [
            (at, opening, closing)
            for opening, closing in self.ends
            if (at := buf.find(opening)) >= 0
        ]
        if found:
            at, opening, closing = min(found)
            end = buf.find(closing, at + len(opening))
            if end < 0:
                self.tail = buf  # end line incomplete: wait for more
                return
            self._keep(buf[:at])
            code, _, cwd = buf[at + len(opening) : end].partition(b" ")
            self.exit_code = int(code) if code.lstrip(b"-").isdigit() else None
            self.cwd = cwd.decode("utf-8", errors="replace")
            self.exited = opening == self.ends[1][0]
            self.after_marker = buf[end + len(closing) :]
            self.tail = b""
            self.done = True
            return
        keep = len(self.ends[0][0]) + 4096
        if len(buf) > keep:
            self._keep(buf[:-keep])
            self.tail = buf[-keep:]
        else:
            self.tail = buf

    def _keep(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap_bytes - len(self.head)
        if room > 0:
            self.head += data[:room]

    def text(self) -> tuple[str, int, bool]:
        if not self.done and self.tail:
            self._keep(self.tail)
            self.tail = b""
        decoded = bytes(self.head).decode("utf-8", errors="replace")
        truncated = self.total > len(self.head) or len(decoded) > self.cap_chars
        return decoded[: self.cap_chars], self.total, truncated
