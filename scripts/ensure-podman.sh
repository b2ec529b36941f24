#!/usr/bin/env bash
# Make sure a Podman engine answers on a Docker-compatible API socket, and print that socket's
# URL (for DOCKER_HOST / the docker_host setting). Installs Debian's podman if it is missing and
# starts `podman system service` in the background. Idempotent: where the socket answers, it
# only prints the URL. Rootful (run as root, or with sudo); see docs/sandbox.md for rootless.
#
#   export DOCKER_HOST=$(scripts/ensure-podman.sh)
#
# ENDLESS_PODMAN_SOCKET picks the socket's path (default /tmp/endless-podman/podman.sock).
#
# Three settings differ from podman's defaults, for this service only (the host's configuration
# files are not changed):
# - the storage option overlay.skip_mount_home (a global flag, which podman passes on to the
#   cleanup processes conmon starts): without it, a podman process that finds no container
#   mounted lazily unmounts podman's whole overlay directory, and with it the disk budget of a
#   container created but not yet started (endless_assets/sandbox/engine/disk.py). The flag replaces
#   the storage options of the host's storage.conf (Debian's rootful default has none);
# - exit_command_delay = 10 (a containers.conf of its own: the host's with that line, through
#   CONTAINERS_CONF): by default every exec leaves a conmon process sleeping for 5 minutes
#   (about 1.6 MB each, and the sandbox execs a lot); the delay is how long an exec's exit code
#   can still be asked for, which the sandbox does at once;
# - default rlimits (open files, processes) no higher than the hard limits this script runs
#   under: rootful Podman raises them to 1048576 and 4194304 for every container, and runc fails
#   to start any container where the engine's own limits are lower and it lacks
#   CAP_SYS_RESOURCE (a sandboxed machine). The sandbox sets them on its task containers anyway
#   (endless_assets/sandbox/engine/podman.py); this makes the rest (a plain `docker run`) work too.
set -euo pipefail

SOCKET="${ENDLESS_PODMAN_SOCKET:-/tmp/endless-podman/podman.sock}"
URL="unix://$SOCKET"
DIR="$(dirname "$SOCKET")"
LOG="$DIR/service.log"

answers() {
  # The API's ping; curl is not on every machine, python3 is wherever this project runs.
  python3 - "$SOCKET" <<'EOF' >/dev/null 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: podman\r\n\r\n")
reply = b""
while chunk := s.recv(4096):
    reply += chunk
sys.exit(0 if reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n")[0] else 1)
EOF
}

if [ -S "$SOCKET" ] && answers; then
  echo "$URL"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# One start at a time (test workers may run this together): the others wait, then find it up.
$SUDO mkdir -p "$DIR"
$SUDO chmod 755 "$DIR"
if [ -w "$DIR" ] && command -v flock >/dev/null 2>&1; then
  exec 9>"$DIR/.lock"
  flock 9
  if [ -S "$SOCKET" ] && answers; then
    echo "$URL"
    exit 0
  fi
fi

if ! command -v podman >/dev/null 2>&1 || [ ! -e /usr/libexec/podman/catatonit ]; then
  echo "ensure-podman: installing podman and catatonit" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq podman catatonit >/dev/null
fi

echo "ensure-podman: starting podman system service on $SOCKET" >&2
$SUDO rm -f "$SOCKET"

# containers.conf: the host's (/etc's, else the packaged defaults), exit_command_delay set, and
# default rlimits no higher than this shell's (see the header) unless the host sets its own.
ENGINE_CONF="$DIR/containers.conf"
HOST_CONF=/etc/containers/containers.conf
[ -f "$HOST_CONF" ] || HOST_CONF=/usr/share/containers/containers.conf
# (podman lowers its own processes limit to 32768 when it starts, so no more than that)
NOFILE="$(ulimit -Hn)"
NPROC="$(ulimit -Hu)"
if [ "$NOFILE" = unlimited ] || [ "$NOFILE" -gt 1048576 ]; then NOFILE=1048576; fi
if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt 32768 ]; then NPROC=32768; fi
ULIMITS="default_ulimits = [\"nofile=$NOFILE:$NOFILE\", \"nproc=$NPROC:$NPROC\"]"
if [ -f "$HOST_CONF" ] && grep -q '^[[:space:]]*default_ulimits' "$HOST_CONF"; then ULIMITS=""; fi
{
  if [ -f "$HOST_CONF" ]; then
    awk -v ulimits="$ULIMITS" '/^[[:space:]]*exit_command_delay[[:space:]]*=/ {next}
      {print}
      /^\[engine\][[:space:]]*$/ {print "exit_command_delay = 10"; engine = 1}
      /^\[containers\][[:space:]]*$/ && ulimits != "" {print ulimits; containers = 1}
      END {
        if (!containers && ulimits != "") print "[containers]\n" ulimits
        if (!engine) print "[engine]\nexit_command_delay = 10"
      }' "$HOST_CONF"
  else
    printf '[containers]\n%s\n[engine]\nexit_command_delay = 10\n' "$ULIMITS"
  fi
} | $SUDO tee "$ENGINE_CONF" >/dev/null

# --time=0: the service never exits for idleness. setsid: it outlives this script's session.
# 9>&-: it does not hold the lock.
$SUDO env CONTAINERS_CONF="$ENGINE_CONF" sh -c "setsid nohup podman \
  --storage-opt overlay.skip_mount_home=true system service --time=0 '$URL' \
  >'$LOG' 2>&1 </dev/null 9>&- &"

for _ in $(seq 1 120); do
  if [ -S "$SOCKET" ] && answers; then
    echo "ensure-podman: engine is up" >&2
    echo "$URL"
    exit 0
  fi
  sleep 0.5
done
echo "ensure-podman: podman did not answer on $SOCKET within 60 s; see $LOG" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
