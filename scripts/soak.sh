#!/usr/bin/env bash
# A soak on this machine: a private redis-server (append-only file, so a restart keeps the data),
# three coordinator pods on free loopback ports, and rsc-soak against them for MINUTES: a few
# hundred members in 50 groups joining, leaving, crashing and coming back, admin calls, malformed
# requests. Meanwhile Redis is stalled once (SIGSTOP for 4 s, longer than a member's self-fence
# window) and restarted once. At the end rsc-soak checks I1 in the members' view, convergence,
# each pod's RSS against its value after warm-up and its descriptors against before the run; this
# script checks that every pod is still running and stops cleanly. Exit status 0 only if all held.
# Everything started here is stopped by pid.
#   bash scripts/soak.sh [MINUTES] [MEMBERS]      (default 2 minutes, 300 members)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-2} members=${2:-300}
secs=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
[ "$secs" -ge 60 ] || { echo "soak: at least 1 minute" >&2; exit 2; }
warmup=$((secs / 10 > 30 ? secs / 10 : 30))
stall_at=$((secs * 4 / 10)) restart_at=$((secs * 65 / 100))
B=${BUILD_DIR:-./build}
KEEP_DIR=${KEEP_DIR:-0}
. scripts/lib/local.sh
local_init soak

rport=$(free_port)
redis_start() { redis_up "$rport" --save "" --appendonly yes --appendfsync everysec; }
redis_start

timing=(--tick-interval-ms 100 --heartbeat-interval-ms 1000 --member-lease-ttl-ms 3000 --rebalance-timeout-ms 5000)
urls="" podpids=() 
for i in 1 2 3; do
  port=$(free_port)
  "$B/rsc-coordinator" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" "${timing[@]}" 2>"$dir/pod$i.log" &
  pids+=($!)
  podpids+=($!)
  urls="${urls:+$urls,}http://127.0.0.1:$port"
done
wait_pods_ready 3
wait_pods_serving 3

echo "soak: $minutes min, $members members, 3 pods, Redis stalled at ${stall_at}s and restarted at ${restart_at}s; logs in $dir"
"$B/benchmarks/rsc-soak" --coordinator "$urls" --seconds "$secs" --members "$members" --streams 10 \
  --groups-per-stream 5 --warmup-seconds "$warmup" --pids "$(IFS=,; echo "${podpids[*]}")" &
soak=$!
pids+=("$soak")

t0=$(date +%s)
sleep_until() { local d=$(($1 - ($(date +%s) - t0))); [ "$d" -gt 0 ] && sleep "$d" || true; }
sleep_until "$stall_at"
echo "soak: t=$(($(date +%s) - t0))s stalling Redis for 4 s (SIGSTOP)"
kill -STOP "$rpid"
sleep 4
kill -CONT "$rpid"
sleep_until "$restart_at"
echo "soak: t=$(($(date +%s) - t0))s restarting Redis (SIGTERM, then the same port and data)"
kill -TERM "$rpid"
wait "$rpid" 2>/dev/null || true
sleep 1
redis_start

rc=0
wait "$soak" || rc=$?
if [ "$rc" -ne 0 ]; then  # what the pods hold open, for the record
  for p in "${podpids[@]}"; do ss -tanp 2>/dev/null | grep "pid=$p," || true; done
fi
for i in 1 2 3; do
  p=${podpids[$((i - 1))]}
  if ! kill -0 "$p" 2>/dev/null; then
    echo "soak: pod $i (pid $p) is not running; its log:" >&2
    tail -20 "$dir/pod$i.log" >&2
    rc=1
    continue
  fi
  kill -TERM "$p"
  prc=0
  wait "$p" || prc=$?
  if [ "$prc" -ne 0 ]; then
    echo "soak: pod $i exited with $prc on SIGTERM; its log:" >&2
    tail -20 "$dir/pod$i.log" >&2
    rc=1
  fi
  echo "soak: pod $i stopped cleanly; $(wc -l <"$dir/pod$i.log") log lines"
done
[ "$rc" -eq 0 ] && echo "soak: PASS" || { echo "soak: FAIL (logs kept in $dir)"; KEEP_DIR=1; }
exit "$rc"
