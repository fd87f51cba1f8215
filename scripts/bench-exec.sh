#!/usr/bin/env bash
# What a handler in another language costs: records/s of rsc-consume with its built-in handler, with
# --exec (a process per record) and with --exec-lines (one long-lived process per worker), side by
# side in one run. A private redis-server and coordinator on free loopback ports; RECORDS records on a
# 4-shard stream, read by one consumer of a group of its own per mode (CONCURRENCY workers); each
# mode is timed from the consumer's start until it logged every record. Everything it started is
# stopped by pid at the end.
#   bash scripts/bench-exec.sh [RECORDS] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-2000} conc=${2:-4}
. scripts/lib/local.sh
local_init exec
start_redis
port=$(free_port)
./build/rsc-coordinator --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" 2>"$dir/pod1.log" &
pids+=($!)
wait_pods_ready 1
url="http://127.0.0.1:$port"
curl -fsS -X PUT "$url/coord/v1/streams/bench" -H 'Content-Type: application/json' -d '{"shardCount": 4}' >/dev/null
./build/rsc-produce --redis "127.0.0.1:$rport" --stream bench --coordinator "$url" --count "$records" \
  --key-space 64 >"$dir/produce.txt"
cat >"$dir/each.sh" <<'SH'
cat >/dev/null
SH
cat >"$dir/lines.sh" <<'SH'
while read -r rec; do echo ok; done
SH

run() {  # run NAME [rsc-consume flags...]: prints records/s
  local name=$1 log="$dir/$1.jsonl" start end n=0 pid
  shift
  start=$(date +%s%N)
  ./build/rsc-consume --coordinator "$url" --redis "127.0.0.1:$rport" --stream bench --group "$name" \
    --member-id "$name" --concurrency "$conc" --log "$log" "$@" 2>"$dir/$name.out" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 6000); do
    n=$( (grep -c '"seq"' "$log" 2>/dev/null) || true)
    [ "${n:-0}" -ge "$records" ] && break
    sleep 0.02
  done
  end=$(date +%s%N)
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  awk -v n="$n" -v ns=$((end - start)) -v name="$name" \
    'BEGIN { printf "%-12s %6d records in %6.2f s: %8.0f records/s\n", name, n, ns / 1e9, n / (ns / 1e9) }'
}
echo "bench-exec: $records records, 4 shards, $conc workers (times include joining the group)"
builtin=$(run builtin)
echo "$builtin"
each=$(run exec --exec "sh $dir/each.sh")
echo "$each"
lines=$(run exec-lines --exec-lines "sh $dir/lines.sh")
echo "$lines"
rate() { awk '{print $(NF-1)}' <<<"$1"; }
awk -v b="$(rate "$builtin")" -v e="$(rate "$each")" -v l="$(rate "$lines")" \
  'BEGIN { printf "ratios: --exec-lines / --exec = %.1f; built-in / --exec-lines = %.1f\n", l / e, b / l }'
