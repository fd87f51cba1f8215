#!/usr/bin/env bash
# Installs what is missing, builds, and runs rsc-coordinator. When no Redis is configured
# (no --redis flag, no RSC_REDIS), a local redis-server is started for it on a free loopback
# port in a temp dir (RSC_RUN_REDIS_PORT=N: on that port), and stopped (by pid) when the
# coordinator exits.
# Any arguments are passed to rsc-coordinator, e.g.  bash scripts/run.sh --listen 127.0.0.1:8080
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what building and running the server and the tools needs (no test, fuzz or benchmark
# packages), and only those targets.
bash scripts/install-deps.sh --run
RSC_LEAN=1 bash scripts/build.sh
bin=./build/rsc-coordinator

configured=${RSC_REDIS:-}
for a in "$@"; do [ "$a" = "--redis" ] && configured=yes; done
if [ -n "$configured" ]; then
  exec "$bin" "$@"
fi

dir=$(mktemp -d /tmp/rsc-run-redis.XXXXXX)
if [ -n "${RSC_RUN_REDIS_PORT:-}" ]; then
  # A port asked for (the README's quickstart names it to its consumers): it must be free.
  port=$RSC_RUN_REDIS_PORT
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "run: RSC_RUN_REDIS_PORT=$port: something already listens on 127.0.0.1:$port" >&2
    rm -rf "$dir"
    exit 2
  fi
else
  source scripts/lib/local.sh  # free_port, as every script that starts a private Redis picks one
  port=$(free_port)
fi
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no --daemonize no \
  --logfile "$dir/redis.log" &
redis_pid=$!
coord_pid=
cleanup() {
  [ -n "$coord_pid" ] && kill -TERM "$coord_pid" 2>/dev/null && wait "$coord_pid" 2>/dev/null
  kill -TERM "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' TERM INT
for _ in $(seq 1 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
echo "run: started redis-server pid $redis_pid on 127.0.0.1:$port (data in $dir, not persisted)"
"$bin" --redis "127.0.0.1:$port" "$@" &
coord_pid=$!
wait "$coord_pid"
