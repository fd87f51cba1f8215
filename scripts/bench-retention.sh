#!/usr/bin/env bash
# Retention under load: two groups on one 4-shard stream, "fast" (4 workers) and "slow"
# (1 worker, SLOW_MS per record: about ten times slower), RECORDS records produced at RATE/s, the
# stream under POLICY: processed (processedByAllGroups) or maxlen=N (maxLen N per shard). Every
# second it prints the stream's length, Redis's memory and each group's lag (read from Redis); when
# the slow group has caught up it checks each group's records (the seqs in its consumer's log)
# against what was produced and what the coordinator counted as trimmed before the group read it:
# processed must lose nothing; maxlen must account for every record (processed or counted).
# A private redis-server and coordinator on free loopback ports; everything is stopped by pid.
#   bash scripts/bench-retention.sh [RECORDS] [RATE] [POLICY] [SLOW_MS] [MAX_SECONDS]
# SLOW_MS may be given in microseconds as e.g. 150us (a busy wait per record).
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-100000} rate=${2:-10000} policy=${3:-processed} slowMs=${4:-1} maxSecs=${5:-900}
. scripts/lib/local.sh
local_init retention
start_redis
port=$(free_port)
./build/rsc-coordinator --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --lag-interval-ms 1000 \
  2>"$dir/pod1.log" &
pids+=($!)
wait_pods_ready 1
url="http://127.0.0.1:$port"
case "$policy" in
  processed) retention='{"policy": "processedByAllGroups"}' ;;
  maxlen=*) retention="{\"policy\": \"maxLen\", \"value\": ${policy#maxlen=}}" ;;
  *) echo "bench-retention: POLICY is processed or maxlen=N, not '$policy'" >&2; exit 2 ;;
esac
curl -fsS -X PUT "$url/coord/v1/streams/bench" -H 'Content-Type: application/json' \
  -d "{\"shardCount\": 4, \"retention\": $retention}" >/dev/null
consumer() {  # consumer GROUP [flags...]
  local g=$1
  shift
  ./build/rsc-consume --coordinator "$url" --redis "127.0.0.1:$rport" --stream bench --group "$g" --member-id "$g" \
    --log "$dir/$g.jsonl" "$@" 2>"$dir/$g.out" &
  pids+=($!)
}
consumer fast --concurrency 4
if [[ "$slowMs" == *us ]]; then slowFlag=(--process-us "${slowMs%us}"); else slowFlag=(--process-ms "$slowMs"); fi
consumer slow --concurrency 1 "${slowFlag[@]}"
sleep 1
start=$(date +%s%N)
./build/rsc-produce --redis "127.0.0.1:$rport" --stream bench --coordinator "$url" --group fast --count "$records" \
  --rate "$rate" --key-space 1024 >"$dir/produce.txt" 2>&1 &
producer=$!
pids+=("$producer")
metric() { curl -fsS "$url/metrics" | awk -v m="$1" '$1 == m { print $2; f = 1 } END { if (!f) print 0 }'; }
lag() { metric "rsc_stream_group_lag{group=\"$1\",stream=\"bench\"}"; }
length() {
  local n=0 i
  for i in 0 1 2 3; do n=$((n + $(redis-cli -p "$rport" XLEN "bench:$i"))); done
  echo "$n"
}
seqs() { grep -o '"seq":[0-9]*' "$dir/$1.jsonl" 2>/dev/null | sort -u | wc -l; }
echo "bench-retention: $records records at $rate/s, 4 shards, policy $policy, slow group ${slowMs} a record (ms unless us)"
printf '%6s %10s %10s %10s %10s %12s\n' "t(s)" "length" "redis MiB" "fast lag" "slow lag" "slow unread-trimmed"
maxLen=0 produced=0 t=0 fastDone=
while true; do
  sleep 1
  t=$(( ($(date +%s%N) - start) / 1000000000 ))
  len=$(length)
  [ "$len" -gt "$maxLen" ] && maxLen=$len
  mem=$(redis-cli -p "$rport" INFO memory | awk -F: '/^used_memory:/ { printf "%.1f", $2 / 1048576 }')
  fl=$(lag fast) sl=$(lag slow)
  ut=$(metric "rsc_stream_trimmed_unread_records_total{group=\"slow\",stream=\"bench\"}")
  printf '%6d %10d %10s %10s %10s %12s\n' "$t" "$len" "$mem" "$fl" "$sl" "$ut"
  [ -z "$fastDone" ] && [ "$produced" -gt 0 ] && [ "$fl" = 0 ] && fastDone=$t
  if ! kill -0 "$producer" 2>/dev/null && [ "$produced" -eq 0 ]; then
    produced=$records
    prodSecs=$t
  fi
  if [ "$produced" -gt 0 ] && [ "$sl" = 0 ] && [ "$fl" = 0 ]; then
    pend=$(metric "rsc_stream_group_pending{group=\"slow\",stream=\"bench\"}")
    [ "$pend" = 0 ] && break
  fi
  [ "$t" -ge "$maxSecs" ] && { echo "bench-retention: gave up after ${maxSecs}s" >&2; break; }
done
sleep 2  # the last acks reach the logs
fast=$(seqs fast) slow=$(seqs slow)
unread=$(metric "rsc_stream_trimmed_unread_records_total{group=\"slow\",stream=\"bench\"}")
trimmed=$(metric 'rsc_stream_trimmed_records_total{stream="bench"}')
echo "produced $records in ${prodSecs:-?}s; everything read in ${t}s; longest the stream got: $maxLen records"
echo "fast processed $fast distinct records, caught up ${fastDone:-?}s after the start"
echo "slow processed $slow distinct records ($(awk -v n="$slow" -v s="$t" 'BEGIN { printf "%.0f", n / s }')/s over the run);" \
  "trimmed before slow read them: ${unread%.*}; trimmed in all: ${trimmed%.*}"
ok=1
[ "$fast" -eq "$records" ] || { echo "FAIL: fast lost $((records - fast)) records" >&2; ok=0; }
if [ "$policy" = processed ]; then
  [ "$slow" -eq "$records" ] || { echo "FAIL: slow lost $((records - slow)) records under processedByAllGroups" >&2; ok=0; }
  [ "${unread%.*}" -eq 0 ] || { echo "FAIL: records trimmed unread under processedByAllGroups" >&2; ok=0; }
else
  [ $((slow + ${unread%.*})) -eq "$records" ] ||
    { echo "FAIL: slow processed $slow + $((${unread%.*})) counted trimmed != $records" >&2; ok=0; }
fi
[ "$ok" -eq 1 ] && echo "bench-retention: PASS" || exit 1
