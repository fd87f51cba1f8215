#!/usr/bin/env bash
# A bounded heartbeat load on this machine: a private redis-server and N coordinator pods on free
# loopback ports, then rsc-load against them; everything is stopped by pid at the end.
# RSC_COORDINATOR_BIN picks another build of the coordinator (to compare two side by side).
#   bash scripts/load.sh [PODS] [GROUPS] [MEMBERS_PER_GROUP] [THREADS] [SECONDS] [STORE_CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-1} groups=${2:-100} per=${3:-10} threads=${4:-8} secs=${5:-5} conns=${6:-2}
. scripts/lib/local.sh
local_init load
start_redis
urls=""
for i in $(seq 1 "$pods"); do
  port=$(free_port)
  "${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --store-connections "$conns" \
    --default-shard-count 16 2>"$dir/pod$i.log" &
  pids+=($!)
  urls="${urls:+$urls,}http://127.0.0.1:$port"
done
sleep 0.5
./build/benchmarks/rsc-load --coordinator "$urls" --groups "$groups" --members-per-group "$per" --threads "$threads" \
  --seconds "$secs"
