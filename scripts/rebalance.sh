#!/usr/bin/env bash
# How long a join and a graceful leave take to converge, notifications off and on in the same run:
# a private redis-server and two coordinator pods (default timings: heartbeat every 3 s) on free
# loopback ports, then rsc-rebalance with the real member runtime; all stopped by pid at the end.
#   bash scripts/rebalance.sh [MEMBERS] [SHARDS] [TRIALS] [BACKGROUND_GROUPS] [rsc-rebalance flags, e.g. --modes on]
set -euo pipefail
cd "$(dirname "$0")/.."
members=${1:-5} shards=${2:-16} trials=${3:-5} background=${4:-0}
. scripts/lib/local.sh
local_init rebalance
start_redis
urls=""
for i in 1 2; do
  port=$(free_port)
  ./build/rsc-coordinator --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" 2>"$dir/pod$i.log" &
  pids+=($!)
  urls="${urls:+$urls,}http://127.0.0.1:$port"
done
wait_pods_ready 2
wait_pods_serving 2
# Members are spread over both pods: a join on one pod must reach owners talking to the other.
./build/benchmarks/rsc-rebalance --coordinator "$urls" --redis "127.0.0.1:$rport" --members "$members" \
  --shards "$shards" --trials "$trials" --background-groups "$background" "${@:5}"
