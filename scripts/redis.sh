#!/usr/bin/env bash
# A real Redis server on a free 127.0.0.1 port, for the proxy's shared-state tests.
#
#   redis.sh start   install Debian's redis-server when it is missing (apt-get, as root), start
#                    one on a free loopback port with nothing persisted, wait until it answers,
#                    print its URL (redis://127.0.0.1:PORT/0).
#   redis.sh stop    stop the server this script started.
# Files live in ${CONDENSE_REDIS_HOME:-$HOME/.cache/condense-redis}. Idempotent: a second start
# stops the first server.
set -euo pipefail
home=${CONDENSE_REDIS_HOME:-$HOME/.cache/condense-redis}
mkdir -p "$home"
stop() {
  if [ -f "$home/server.pid" ]; then
    kill "$(cat "$home/server.pid")" 2>/dev/null || true
    rm -f "$home/server.pid"
  fi
}
case "${1:-start}" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: redis.sh start | stop" >&2; exit 2 ;;
esac
stop
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "redis-server is missing and installing it needs root (apt-get install redis-server)" >&2
    exit 1
  fi
  echo "installing Debian's redis-server (first run only)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >&2; }
fi
# A free port: bind port 0 and read what the kernel chose.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --daemonize yes \
  --pidfile "$home/server.pid" --logfile "$home/server.log" --dir "$home" >&2
for _ in $(seq 1 50); do
  if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
    echo "redis://127.0.0.1:$port/0"; exit 0
  fi
  sleep 0.1
done
echo "redis-server did not answer: $(tail -3 "$home/server.log" 2>/dev/null)" >&2; exit 1
