#!/usr/bin/env bash
# Rebalance latency on one pod and on three pods behind a load balancer, in one run: a private
# redis-server, three coordinator pods (default timings: heartbeat every 3 s) and rsc-proxy (a
# loopback round-robin TCP proxy standing in for a Kubernetes Service) on free loopback ports; then
# rsc-rebalance with the real member runtime (notifications on), first with every member talking
# to pod 1 directly, then with every member talking to the proxy (its kept-alive connection lands
# on one of the three pods). All stopped by pid at the end.
#   bash scripts/rebalance-pods.sh [MEMBERS] [SHARDS] [TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
members=${1:-5} shards=${2:-16} trials=${3:-5}
. scripts/lib/local.sh
local_init rebalance-pods
start_redis
backends=""
first=""
for i in 1 2 3; do
  port=$(free_port)
  ./build/rsc-coordinator --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" 2>"$dir/pod$i.log" &
  pids+=($!)
  backends="${backends:+$backends,}127.0.0.1:$port"
  [ -n "$first" ] || first="http://127.0.0.1:$port"
done
wait_pods_ready 3
pport=$(free_port)
./build/benchmarks/rsc-proxy --listen "127.0.0.1:$pport" --backends "$backends" 2>"$dir/proxy.log" &
pids+=($!)
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$pport") 2>/dev/null && break; sleep 0.1; done
echo "### one pod (every member on pod 1)"
./build/benchmarks/rsc-rebalance --coordinator "$first" --redis "127.0.0.1:$rport" --members "$members" \
  --shards "$shards" --trials "$trials" --modes on | tee "$dir/one.txt"
echo "### three pods behind rsc-proxy"
./build/benchmarks/rsc-rebalance --coordinator "http://127.0.0.1:$pport" --redis "127.0.0.1:$rport" \
  --members "$members" --shards "$shards" --trials "$trials" --modes on | tee "$dir/three.txt"
echo
echo "== rebalance latency, median (max), join and graceful leave to converged"
printf '%-28s %s\n' "one pod:" "$(grep '^notifications on' "$dir/one.txt" | sed 's/^notifications on *//')"
printf '%-28s %s\n' "three pods behind a proxy:" "$(grep '^notifications on' "$dir/three.txt" | sed 's/^notifications on *//')"
# How often a pod's copy was found stale (another pod had written) before an answer.
for b in ${backends//,/ }; do
  echo "pod $b: $(curl -s "http://$b/metrics" | grep '^rsc_copy_checks_total' | tr '\n' ' ')"
done
