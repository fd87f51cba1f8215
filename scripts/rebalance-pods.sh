#!/usr/bin/env bash
# Rebalance latency on one pod and on three pods behind a load balancer, in one run: a private
# redis-server, three coordinator pods (default timings: heartbeat every 3 s) and rsc-proxy (a
# loopback round-robin TCP proxy standing in for a Kubernetes Service) on free loopback ports; then
# rsc-rebalance with the real member runtime (notifications on), first with one pod alone, then
# with two more pods started and every member talking to the proxy (its kept-alive connection
# lands on one of the three pods, which forwards a group's calls to the group's owner). All
# stopped by pid at the end.
#   bash scripts/rebalance-pods.sh [MEMBERS] [SHARDS] [TRIALS]
# RSC_COORDINATOR_BIN picks another build of the coordinator (to compare two side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
members=${1:-5} shards=${2:-16} trials=${3:-5}
. scripts/lib/local.sh
local_init rebalance-pods
start_redis
backends=""
first=""
start_pod() {
  local port
  port=$(free_port)
  "${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" 2>"$dir/pod$1.log" &
  pids+=($!)
  backends="${backends:+$backends,}127.0.0.1:$port"
  [ -n "$first" ] || first="http://127.0.0.1:$port"
}
start_pod 1
wait_pods_ready 1
echo "### one pod"
./build/benchmarks/rsc-rebalance --coordinator "$first" --redis "127.0.0.1:$rport" --members "$members" \
  --shards "$shards" --trials "$trials" --modes on | tee "$dir/one.txt"
start_pod 2
start_pod 3
wait_pods_ready 3
wait_pods_serving 3  # the two new pods take their share of the groups one pod lease after they start
pport=$(free_port)
./build/rsc-proxy --listen "127.0.0.1:$pport" --backends "$backends" 2>"$dir/proxy.log" &
pids+=($!)
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$pport") 2>/dev/null && break; sleep 0.1; done
echo "### three pods behind rsc-proxy"
./build/benchmarks/rsc-rebalance --coordinator "http://127.0.0.1:$pport" --redis "127.0.0.1:$rport" \
  --members "$members" --shards "$shards" --trials "$trials" --modes on | tee "$dir/three.txt"
echo
echo "== rebalance latency, median (max), join and graceful leave to converged"
printf '%-28s %s\n' "one pod:" "$(grep '^notifications on' "$dir/one.txt" | sed 's/^notifications on *//')"
printf '%-28s %s\n' "three pods behind a proxy:" "$(grep '^notifications on' "$dir/three.txt" | sed 's/^notifications on *//')"
# Calls forwarded to a group's owner, and copies checked (none found stale: only the owner writes).
for b in ${backends//,/ }; do
  echo "pod $b: $(curl -s "http://$b/metrics" | grep -E '^rsc_(copy_checks|forwarded_calls)_total' | tr '\n' ' ')"
done
