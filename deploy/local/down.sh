#!/usr/bin/env bash
# Stops what deploy/local/up.sh started (the pids it recorded in $RSC_LOCAL_DIR, default
# /tmp/rsc-local): SIGTERM, a wait of up to 10 s, then SIGKILL for what is left.
set -euo pipefail
state=${RSC_LOCAL_DIR:-/tmp/rsc-local}
[ -s "$state/pids" ] || { echo "down.sh: nothing recorded in $state"; exit 0; }
while read -r pid what; do
  kill -TERM "$pid" 2>/dev/null && echo "down.sh: stopping $what (pid $pid)" || true
done <"$state/pids"
for _ in $(seq 1 100); do
  alive=0
  while read -r pid _; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$state/pids"
  [ "$alive" = 0 ] && break
  sleep 0.1
done
while read -r pid what; do
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; echo "down.sh: killed $what (pid $pid)"; }
done <"$state/pids"
: >"$state/pids"
echo "down.sh: stopped; logs stay in $state"
