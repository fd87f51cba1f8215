#!/usr/bin/env bash
# Produce + consume throughput of a 16-shard stream on one Redis vs a Redis Cluster of three
# masters, on this machine, side by side in one run (alternating single, cluster, single, ...), and
# the end-to-end latency of records produced at a low rate. Everything runs on loopback in a temp
# dir and is stopped by pid at exit.
#
#   bash scripts/cluster-figure.sh [ROUNDS=2] [RECORDS=40000] [CONSUMERS=2] [LOW_RATE=200]
#
# Per round and mode: one coordinator, CONSUMERS rsc-consume processes (concurrency 4 each),
# rsc-produce writing RECORDS as fast as it can (its own rate is the produce figure); consume
# throughput is RECORDS over the time from the producer's start to the last record processed.
# Then 2,000 records at LOW_RATE/s: latency from the entry id's milliseconds (when Redis added it)
# to the end of its processing (wallMs in the consumer log), p50 and p99; then, with nothing
# produced, the commands per second all Redis nodes run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/local.sh
ROUNDS=${1:-2}
RECORDS=${2:-40000}
CONSUMERS=${3:-2}
LOW_RATE=${4:-200}
BIN=${RSC_BUILD_DIR:-build}
for b in rsc-coordinator rsc-consume rsc-produce; do
  [ -x "$BIN/$b" ] || { echo "build first (bash scripts/build.sh): $BIN/$b missing" >&2; exit 1; }
done
local_init cluster-figure

cluster_up() {  # cluster_up NAME: starts 3 cluster-enabled masters in $dir/NAME-cN, joins them; sets seeds
  local ports=() p b d
  for i in 1 2 3; do
    p=$(free_port); b=$(free_port)
    d="$dir/$1-c$i"
    mkdir -p "$d"
    redis-server --port "$p" --bind 127.0.0.1 --dir "$d" --daemonize no --logfile "$d/redis.log" \
      --save "" --appendonly no --cluster-enabled yes --cluster-config-file "$d/nodes.conf" \
      --cluster-port "$b" --cluster-node-timeout 2000 &
    pids+=("$!")
    ports+=("$p")
  done
  for p in "${ports[@]}"; do
    for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
  done
  seeds=$(for p in "${ports[@]}"; do printf '127.0.0.1:%s,' "$p"; done)
  seeds=${seeds%,}
  redis-cli --cluster create $(for p in "${ports[@]}"; do printf '127.0.0.1:%s ' "$p"; done) --cluster-yes >/dev/null
  for _ in $(seq 1 200); do
    local ok=0
    for p in "${ports[@]}"; do [[ $(redis-cli -p "$p" cluster info) == *cluster_state:ok* ]] && ok=$((ok + 1)); done
    [ "$ok" = 3 ] && return
    sleep 0.05
  done
  echo "the cluster did not reach cluster_state:ok; see $dir/$1-c*/redis.log" >&2
  return 1
}

# run MODE ROUND: one measurement; prints "MODE produce/s consume/s p50ms p99ms"
run() {
  local mode=$1 round=$2 redis port cpids=() start end
  local started=("${pids[@]}")
  local nodes
  if [ "$mode" = single ]; then
    start_redis
    redis=127.0.0.1:$rport
  else
    cluster_up "$mode-$round"
    redis=$seeds
  fi
  nodes=$(echo "$redis" | tr ',' ' ')
  port=$(free_port)
  "$BIN/rsc-coordinator" --listen "127.0.0.1:$port" --redis "$redis" --tick-interval-ms 100 \
    --heartbeat-interval-ms 500 >"$dir/pod-$mode-$round.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
  curl -sf -X PUT "127.0.0.1:$port/coord/v1/streams/orders" -H 'content-type: application/json' \
    -d '{"shardCount": 16}' >/dev/null
  for i in $(seq 1 "$CONSUMERS"); do
    "$BIN/rsc-consume" --coordinator "http://127.0.0.1:$port" --redis "$redis" --stream orders --group billing \
      --member-id "m$i" --concurrency 4 --log "$dir/$mode-$round-m$i.jsonl" >"$dir/$mode-$round-m$i.out" 2>&1 &
    pids+=("$!")
    cpids+=("$!")
  done
  sleep 1.5  # the consumers join and split the shards
  start=$(date +%s%N)
  "$BIN/rsc-produce" --redis "$redis" --stream orders --coordinator "http://127.0.0.1:$port" --group billing \
    --count "$RECORDS" --key-space 1000 --seed "$round" >"$dir/produce-$mode-$round.out" 2>&1
  local produced_s
  produced_s=$(sed -n 's/.* in \([0-9.]*\)s$/\1/p' "$dir/produce-$mode-$round.out" | tail -1)
  for _ in $(seq 1 1200); do  # at most 120 s
    [ "$(cat "$dir/$mode-$round"-m*.jsonl 2>/dev/null | grep -c '"seq"')" -ge "$RECORDS" ] && break
    sleep 0.1
  done
  end=$(date +%s%N)
  local done_n
  done_n=$(cat "$dir/$mode-$round"-m*.jsonl | grep -c '"seq"')
  # Latency: records at a low rate (the seqs go on after RECORDS so they are told apart).
  "$BIN/rsc-produce" --redis "$redis" --stream orders --shards 16 --key-pattern 'orders:{shardIndex}' \
    --count 2000 --rate "$LOW_RATE" --key-space 1000 --seed 99 >"$dir/low-$mode-$round.out" 2>&1
  sleep 1
  # At rest: commands Redis runs per second with nothing produced (reads, heartbeats' writes).
  local c0 c1
  commands() { for n in $nodes; do redis_stat "${n##*:}" total_commands_processed; done | awk '{s += $1} END {print s}'; }
  c0=$(commands); sleep 3; c1=$(commands)
  python3 - "$mode" "$RECORDS" "$done_n" "$produced_s" "$start" "$end" "$dir/$mode-$round" "$(( (c1 - c0) / 3 ))" <<'PY'
import glob, json, sys
mode, records, done, produced_s, start, end, prefix, idle = sys.argv[1:]
records, done = int(records), int(done)
lines = []
for f in glob.glob(prefix + "-m*.jsonl"):
    for line in open(f):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if "seq" in j:
            lines.append(j)
# The low-rate records: seq 0..1999 written after the throughput run (ids after its last one).
ids_bulk_end = sorted(lines, key=lambda j: (int(j["id"].split("-")[0]), int(j["id"].split("-")[1])))
low = ids_bulk_end[records:] if len(ids_bulk_end) > records else []
lat = sorted(j["wallMs"] - int(j["id"].split("-")[0]) for j in low)
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
consume = done / ((int(end) - int(start)) / 1e9)
produce = records / float(produced_s) if produced_s else float("nan")
print(f"{mode} {produce:.0f} {consume:.0f} {p(0.5)} {p(0.99)} {idle} {len(lat)}")
PY
  # Stop this round's processes (consumers leave first), as started.
  for p in "${cpids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    case " ${started[*]} " in *" $p "*) ;; *) kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true ;; esac
  done
  pids=("${started[@]}")
}

echo "mode              produce/s consume/s p50ms p99ms idle-cmds/s (low-rate records measured)"
results=()
for r in $(seq 1 "$ROUNDS"); do
  for m in single cluster; do
    line=$(run "$m" "$r")
    echo "$line" | awk '{printf "%-17s %9s %9s %5s %5s %11s (%s)\n", $1, $2, $3, $4, $5, $6, $7}'
    results+=("$line")
  done
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
med = lambda m, i: statistics.median(float(r[i]) for r in rows if r[0] == m)
c = "cluster"
print("median of %d rounds, 3 masters vs 1 node: produce %.2f, consume %.2f; at a low rate p50 %.0f vs %.0f ms, "
      "p99 %.0f vs %.0f ms; at rest %.0f vs %.0f Redis commands/s" % (
      len(rows) // 2, med(c, 1) / med("single", 1), med(c, 2) / med("single", 2), med(c, 3), med("single", 3),
      med(c, 4), med("single", 4), med(c, 5), med("single", 5)))'
