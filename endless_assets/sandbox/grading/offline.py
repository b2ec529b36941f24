"""Offline stand-ins for the installation steps graders usually start with (grading has no
network): `apt-get update; apt-get install -y curl`, the uv installer through `curl ... | sh`,
`uv venv`, `uv pip install pytest`, `pip install pytest`, then `uv run pytest` or `uvx pytest`
(offline_uv.py reads uv's and pip's arguments as they do). Put first on the script's PATH, each
step is served by what the image has; one that would need what the image lacks fails and writes
itself, with the reason, to $ENDLESS_OFFLINE_REPORT: the task is then rejected `needs_network`
(unless its reward is 1 anyway). Pinned versions are not checked: the image's serves."""

from __future__ import annotations

import shlex

from endless_assets.sandbox.grading import offline_pytest, offline_uv

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_PRELUDE = r"""#!/bin/sh
# endless: an offline stand-in (grading has no network), see endless_assets/sandbox/grading/
here=$(cd "$(dirname "$(readlink -f "$0" 2>/dev/null || echo "$0")")" && pwd)  # (links too)
report() {
  printf '%s\n' "$*" >> "${ENDLESS_OFFLINE_REPORT:-/dev/null}"
  echo "endless offline: $*" >&2
}
# What a program's name means here: the image's own PATH (its ENV line), never the script's,
# which may lead through a directory the agent wrote.
real() {
  old_ifs=$IFS; IFS=:
  for d in $IMAGE_PATH; do
    if [ "$d" != "$here" ] && [ -x "$d/$1" ]; then IFS=$old_ifs; echo "$d/$1"; return 0; fi
  done
  IFS=$old_ifs; return 1
}
"""

_APT = r"""cmd=""
for a in "$@"; do case "$a" in -*) ;; *) cmd=$a; break ;; esac; done
case "$cmd" in
  update|clean|autoclean|autoremove|upgrade|dist-upgrade) exit 0 ;;
  install) ;;
  *) if r=$(real "$(basename "$0")"); then exec "$r" "$@"; fi; exit 0 ;;
esac
missing=""
seen_install=""
for a in "$@"; do
  case "$a" in -*) continue ;; esac
  if [ -z "$seen_install" ]; then [ "$a" = install ] && seen_install=1; continue; fi
  p=${a%%=*}; p=${p%%:*}
  case "$p" in curl|wget|ca-certificates|python3-pip) continue ;; esac  # (served here)
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    continue
  fi
  missing="$missing $p"
done
if [ -n "$missing" ]; then
  report "$(basename "$0") $*: not installed in the image:$missing"
  exit 100
fi
exit 0
"""

# The uv installer's stand-in: an `env` file to source that changes nothing, and `uv` and `uvx`
# linked to the stand-ins (`$shims`) where the real installer would put them, for scripts that
# run ~/.local/bin/uv by its path (where that is read-only at grading, what it has serves).
_UV_INSTALLER = r"""{ mkdir -p "$HOME/.local/bin" "$HOME/.cargo"
  echo '# endless: uv is served offline by stand-ins first on PATH' > "$HOME/.local/bin/env"
  cp "$HOME/.local/bin/env" "$HOME/.cargo/env"
  for dir in "$HOME/.local/bin" "$HOME/.cargo/bin" "${CARGO_HOME:+$CARGO_HOME/bin}" \
      "${XDG_BIN_HOME:-}" "${UV_INSTALL_DIR:-}" "${UV_UNMANAGED_INSTALL:-}"; do
    [ -n "$dir" ] && mkdir -p "$dir" || continue
    for tool in uv uvx; do
      [ -e "$dir/$tool" ] || ln -s "$shims/$tool" "$dir/$tool"
    done
  done; } 2>/dev/null
echo "endless offline: uv is served by the image's python and pytest"
"""

_FETCH = (
    "installer=$(cat <<'ENDLESS_INSTALLER'\n"
    + _UV_INSTALLER
    + "ENDLESS_INSTALLER\n)\n"
    + r"""out=""
prev=""
url=""
for a in "$@"; do
  case "$prev" in -o|--output|-O|--output-document) out=$a ;; esac
  case "$a" in http://*|https://*|ftp://*) url=$a ;; esac
  prev=$a
done
case "$url" in
  *astral.sh/uv/*|*astral.sh/uv)
    if [ -n "$out" ] && [ "$out" != "-" ]; then
      printf "shims='%s'\n%s" "$here" "$installer" > "$out"
    else
      printf "shims='%s'\n%s" "$here" "$installer"
    fi
    exit 0 ;;
  http://localhost*|http://127.0.0.1*|https://localhost*|https://127.0.0.1*)
    if r=$(real "$(basename "$0")"); then exec "$r" "$@"; fi ;;
esac
report "$(basename "$0") $*: downloads from the network"
exit 6
"""
)

_PYTHON_TOOL = r"""if ! command -v "$TRUSTED_PY" >/dev/null 2>&1; then
  report "$(basename "$0") $*: the image has no python3 to serve it"
  exit 127
fi
exec "$TRUSTED_PY" -s "$here/endless_offline.py" "$(basename "$0")" "$@"
"""


def shims(python: str = "python3", image_path: str = DEFAULT_PATH) -> dict[str, str]:
    """Program name -> its stand-in. `python`: what uv, uvx and pip run (the first grader's, by
    path); `image_path`: the image's own PATH, where the stand-ins find what they hand over to."""
    settings = f"TRUSTED_PY={shlex.quote(python)}\nIMAGE_PATH={shlex.quote(image_path)}\n"
    prelude = _PRELUDE.replace("here=$(", settings + "here=$(", 1)
    shell = {"apt-get": _APT, "apt": _APT, "curl": _FETCH, "wget": _FETCH}
    shell |= dict.fromkeys(("uv", "uvx", "pip", "pip3"), _PYTHON_TOOL)
    found = {name: prelude + text for name, text in shell.items()}
    for name, text in offline_pytest.stand_ins().items():
        found[name] = text if "." in name else prelude + text
    found["endless_offline.py"] = offline_uv.TOOL
    found["endless_ctrf.py"] = offline_uv.CTRF
    return found
