#!/usr/bin/env bash
# The members table: for each size MEMBERSxGROUPS, a private redis-server and PODS coordinator pods
# on free loopback ports (fresh for each size), rsc-load joins every member, then sends heartbeats
# shaped as the member runtime sends them (ownedShards, revokingShards and a shardProgress entry
# per owned shard) for SECONDS: each member every INTERVAL_MS (an offered rate, as real members),
# or as fast as answers come (INTERVAL_MS 0). Prints one table: heartbeats/s, the coordinator's CPU
# per heartbeat (summed over the pods), Redis commands and Redis CPU per heartbeat, the pods'
# context switches per heartbeat (each thread a heartbeat crosses may have to be woken), the load
# generator's own CPU per heartbeat (it shares the cores), p50/p99, the pods' memory per member,
# errors, and members expired (answers FENCED/UNKNOWN seen by the load, and the pods'
# rsc_members_expired_total). Everything it started is stopped by pid.
#   bash scripts/bench-members.sh [SIZES] [INTERVAL_MS] [SECONDS] [PODS] [THREADS]
# SIZES is a comma-separated list of MEMBERSxGROUPS (default 1000x200,20000x2000,100000x10000).
# Before anything is measured, every member heartbeats SETTLE_ROUNDS times (default 3; as fast as
# answers come) so that the groups' rebalances after the joins are over: the measured heartbeats are
# steady ones (paced runs settle the same way, then keep to their interval).
# PROGRESS=moving (default: records flowing, so every heartbeat changes what the coordinator
# stores), still (idle consumers) or none. RSC_COORDINATOR_BIN picks another build, RSC_POD_ARGS
# adds flags to the pods (e.g. "--lease-renewal-slack-ms 0"). With INTERVAL_MS > 0 the pods get it
# as their heartbeat interval (the default, 3000, is the design's) and a lease of 5 intervals; as
# fast as answers come, a lease of 60 s (a round of 100,000 members takes longer than 15 s here).
# PIN=1 keeps the pods on CPU 0 and everything else (Redis, the load generator, this script) on the
# other CPUs, so that a pod's threads wake each other on one CPU instead of across CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/local.sh
pin_pods "$PWD/scripts/bench-members.sh" "$@"
sizes=${1:-1000x200,20000x2000,100000x10000} interval=${2:-0} secs=${3:-10} npods=${4:-1} threads=${5:-16}
progress=${PROGRESS:-moving} settle=${SETTLE_ROUNDS:-3}
rows=()
metric_sum() {  # metric_sum NAME URL...: the metric summed over the pods
  local t=0 u v
  for u in "${@:2}"; do
    v=$(curl -fsS "$u/metrics" | awk -v m="$1" '$1 == m { print $2 }')
    t=$(awk -v a="$t" -v b="${v:-0}" 'BEGIN { print a + b }')
  done
  echo "$t"
}
run_size() {  # run_size MEMBERS GROUPS: appends a row
  local members=$1 groups=$2 per urls=() podpids="" p i out row timing=()
  per=$(( members / groups ))
  [ "$per" -ge 1 ] && [ $(( per * groups )) -eq "$members" ] ||
    { echo "bench-members: $members members do not split evenly into $groups groups" >&2; exit 2; }
  local_init members
  start_redis
  # As fast as answers come, a round of 100,000 members takes longer than the default 15 s lease:
  # the pods get a 60 s lease then, so that no member expires between its heartbeats.
  if [ "$interval" -gt 0 ]; then timing=(--heartbeat-interval-ms "$interval" --member-lease-ttl-ms $((5 * interval)))
  else timing=(--member-lease-ttl-ms 60000); fi
  for i in $(seq 1 "$npods"); do
    p=$(free_port)
    "${pin[@]}" "${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}" --listen "127.0.0.1:$p" --redis "127.0.0.1:$rport" \
      --default-shard-count 16 "${timing[@]}" ${RSC_POD_ARGS:-} 2>"$dir/pod$i.log" &
    pids+=($!)
    podpids="${podpids:+$podpids,}$!"
    urls+=("http://127.0.0.1:$p")
  done
  wait_pods_ready "$npods"
  wait_pods_serving "$npods"
  local joined="" all
  all=$(IFS=,; echo "${urls[*]}")
  out=$(./build/benchmarks/rsc-load --coordinator "$all" --groups "$groups" --members-per-group "$per" \
    --threads "$threads" --seconds "$secs" --interval-ms "$interval" --progress "$progress" --settle-rounds "$settle" \
    --redis "127.0.0.1:$rport" --pids "$podpids" 2>&1) || true
  echo "$out" | sed 's/^/  /' >&2
  row=$(echo "$out" | grep '^rsc-load: row ' | tail -1)
  [ -n "$row" ] || { echo "bench-members: rsc-load printed no row for $members x $groups" >&2; exit 1; }
  joined=$(echo "$out" | sed -n 's/.* joined in \([0-9.]*\) s.*/\1/p' | head -1)
  rows+=("$row joined_s=${joined:--} pod_expired=$(metric_sum rsc_members_expired_total "${urls[@]}")")
  local_cleanup
  trap - EXIT
}
IFS=, read -ra list <<<"$sizes"
for s in "${list[@]}"; do
  m=${s%x*} g=${s#*x}
  echo "bench-members: $m members in $g groups, $npods pod(s), $( [ "$interval" -gt 0 ] && echo "every $interval ms" || echo "as fast as answers come"), progress $progress, ${secs}s" >&2
  run_size "$m" "$g"
done
echo
echo "members × groups, $npods pod(s), $( [ "$interval" -gt 0 ] && echo "each member every $interval ms" || echo "as fast as answers come"), progress $progress, ${secs} s, $threads load threads${pin_note:+, $pin_note}:"
printf '%s\n' "${rows[@]}" | awk '
  function v(k,   i, kv) { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "-" }
  BEGIN {
    print "| members × groups | heartbeats/s | coordinator CPU µs/hb | Redis calls/hb | Redis CPU µs/hb | context switches/hb | load gen CPU µs/hb | p50 ms | p99 ms | bytes/member | errors | expired (answers / pods) | joined in s |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  }
  { j = v("joined_s"); if (j != "-") j = sprintf("%.1f", j)
    printf "| %s × %s | %s | %.1f | %.2f | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f | %s | %s / %s | %s |\n",
      v("members"), v("groups"), v("hbps"), v("cpu_us"), v("redis_calls"), v("redis_cpu_us"), v("switches"), v("load_cpu_us"),
      v("p50_ms"), v("p99_ms"), v("bytes_per_member"), v("errors"), v("expired"), v("pod_expired"), j }'
