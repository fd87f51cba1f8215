#!/usr/bin/env bash
# Runs the README's quickstart as written, so that it cannot rot: the block marked
# quickstart:coordinator in the background, then, once the coordinator answers /readyz, every
# command of the block marked quickstart:steps, with `set -e` (any command that fails fails the
# check). The only changes: the coordinator's port 8080, the redis port 6390 and the /tmp log files
# become free loopback ports and files in a temp dir, so that it runs beside anything else. Then it
# checks what the quickstart promises: two members in the group, 4 shards each, and all 2,000
# records processed by the two consumers. Everything it started is stopped by pid.
#   bash scripts/check-quickstart.sh          (needs ./build: bash scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/local.sh
local_init quickstart
block() {  # block MARKER: the ```sh block after the README line holding <!-- quickstart:MARKER
  awk -v m="<!-- quickstart:$1" 'index($0, m) == 1 { found = 1; next }
    found && /^```sh$/ { inside = 1; next } inside && /^```$/ { exit } inside { print }' README.md
}
coord=$(block coordinator) steps=$(block steps)
[ -n "$coord" ] && [ -n "$steps" ] || { echo "check-quickstart: README has no quickstart blocks" >&2; exit 1; }
P=$(free_port) R=$(free_port)
localize() { sed -e "s/127\.0\.0\.1:8080/127.0.0.1:$P/g" -e "s/6390/$R/g" -e "s#/tmp/c\([0-9]\)\.log#$dir/c\1.log#g"; }
coord=$(echo "$coord" | localize) steps=$(echo "$steps" | localize)
echo "check-quickstart: coordinator: $coord"
setsid bash -c "$coord" >"$dir/coordinator.log" 2>&1 &
runpid=$!
pids+=($runpid)
# run.sh and what it started (its own session), then until its redis-server and coordinator are gone.
stop_run() {
  kill -TERM -- "-$runpid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$R") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$P") 2>/dev/null || break
    sleep 0.1
  done
}
trap 'stop_run; local_cleanup' EXIT
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$P/readyz" >/dev/null 2>&1 && break
  kill -0 "$runpid" 2>/dev/null || { cat "$dir/coordinator.log" >&2; echo "check-quickstart: the coordinator exited" >&2; exit 1; }
  sleep 0.5
done
curl -fs "http://127.0.0.1:$P/readyz" >/dev/null || { echo "check-quickstart: not ready after 5 minutes" >&2; exit 1; }
# The steps in this shell: their background consumers are this shell's jobs.
set -x
eval "$steps" >"$dir/steps.out"
set +x
consumers=$(jobs -p | grep -vx "$runpid" || true)
cat "$dir/steps.out"
# What the quickstart promises, within 20 s: both members active with 4 shards each, every record read.
ok=0
for _ in $(seq 1 40); do
  d=$(curl -fs "http://127.0.0.1:$P/coord/v1/streams/orders/groups/billing")
  n=$(cat "$dir"/c1.log "$dir"/c2.log 2>/dev/null | grep -c '"seq"' || true)
  if echo "$d" | python3 -c '
import json, sys
g = json.load(sys.stdin)
ms = {m["memberId"]: m for m in g["members"]}
assert sorted(ms) == ["c1", "c2"], ms
assert all(len(m["assignedShards"]) == 4 for m in ms.values()), ms
' 2>/dev/null && [ "$n" -ge 2000 ]; then ok=1; break; fi
  sleep 0.5
done
kill -TERM $consumers 2>/dev/null || true
wait $consumers 2>/dev/null || true
distinct=$(cat "$dir"/c1.log "$dir"/c2.log | python3 -c '
import json, sys
print(len({(r["shard"], r["id"]) for r in map(json.loads, sys.stdin) if "seq" in r}))')
echo "check-quickstart: members c1 c2 with 4 shards each: $ok; records processed (distinct): $distinct of 2000"
[ "$ok" = 1 ] && [ "$distinct" = 2000 ] || { echo "check-quickstart: FAILED" >&2; tail -20 "$dir/coordinator.log" >&2; exit 1; }
echo "check-quickstart: PASS"
