#!/usr/bin/env bash
# What groups at rest cost: a private redis-server and PODS coordinator pods on free loopback
# ports; GROUPS groups with one member each join (rsc-load --rounds 1), then nobody heartbeats
# (lease 600 s) and for SECONDS the script reads the pods' CPU time (/proc/PID/stat) and Redis's
# command and socket-read counters (INFO stats). Prints the figures, total and per 1,000 groups.
# Everything it started is stopped by pid at the end.
#   bash scripts/bench-idle.sh [GROUPS] [PODS] [SECONDS]
# RSC_COORDINATOR_BIN picks another build of the coordinator (to compare two side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
groups=${1:-1000} pods=${2:-1} secs=${3:-20}
bin=${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}
. scripts/lib/local.sh
local_init idle
start_redis
urls=""
podpids=()
for i in $(seq 1 "$pods"); do
  port=$(free_port)
  "$bin" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --member-lease-ttl-ms 600000 \
    --heartbeat-interval-ms 3000 --tick-interval-ms 1000 --default-shard-count 16 2>"$dir/pod$i.log" &
  pids+=($!)
  podpids+=($!)
  urls="${urls:+$urls,}http://127.0.0.1:$port"
done
wait_pods_ready "$pods"
wait_pods_serving "$pods"
./build/benchmarks/rsc-load --coordinator "$urls" --groups "$groups" --members-per-group 1 --threads 8 \
  --seconds 600 --rounds 1 --stream idle >"$dir/setup.txt"
echo "setup: $(cat "$dir/setup.txt")"
sleep 3  # let what the joins started settle

stat() { redis_stat "$rport" "$1"; }
hz=$(getconf CLK_TCK)
t0=$(pods_cpu_ticks) c0=$(stat total_commands_processed) r0=$(stat total_reads_processed) s0=$(date +%s.%N)
sleep "$secs"
t1=$(pods_cpu_ticks) c1=$(stat total_commands_processed) r1=$(stat total_reads_processed) s1=$(date +%s.%N)
rss=0
for p in "${podpids[@]}"; do rss=$((rss + $(awk '/VmRSS/ {print $2}' "/proc/$p/status"))); done
awk -v g="$groups" -v pods="$pods" -v t="$((t1 - t0))" -v hz="$hz" -v c="$((c1 - c0))" -v r="$((r1 - r0))" \
  -v s0="$s0" -v s1="$s1" -v rss="$rss" -v bin="$bin" 'BEGIN {
  s = s1 - s0; cores = t / hz / s; calls = c / s; reads = r / s;
  printf "bench-idle: %s, %d groups at rest, %d pod(s), %.1f s measured\n", bin, g, pods, s;
  printf "  coordinator CPU      %.4f cores (%.4f per 1,000 groups)\n", cores, cores * 1000 / g;
  printf "  redis calls          %.1f /s (%.1f per 1,000 groups)\n", calls, calls * 1000 / g;
  printf "  redis socket reads   %.1f /s (%.1f per 1,000 groups)\n", reads, reads * 1000 / g;
  printf "  coordinator RSS      %.1f MiB in all\n", rss / 1024;
}'
