#!/usr/bin/env bash
# A second, independent load generator for the steady-heartbeat figure: wrk (installed here if
# missing) against one coordinator pod and a private redis-server on free loopback ports. Members
# join and settle first (scripts/lib/settle-members.py); then wrk sends their steady heartbeats
# (scripts/lib/wrk-heartbeat.lua, a requestId of their own each), then /healthz, for SECONDS each,
# and the pod's CPU (utime + stime) per request of each is printed with their ratio, as rsc-load
# prints them, with Redis's commands per request and the heartbeats answered other than OK (the pods
# get a 10-minute member lease, so that no member expires while the others settle or while wrk
# walks the file). Everything it started is stopped by pid at the end.
#   bash scripts/wrk-heartbeats.sh [GROUPS] [MEMBERS_PER_GROUP] [SECONDS] [CONNECTIONS] [THREADS]
# RSC_COORDINATOR_BIN picks another build of the coordinator, RSC_POD_ARGS adds flags to the pods
# (e.g. "--lease-renewal-slack-ms 0": every heartbeat written). RSC_WRK_PODS=N runs N pods behind
# rsc-proxy (round robin per connection, as a Kubernetes Service); CPU is then summed over the pods.
# RSC_WRK_HTTPS=1 serves and sends everything over HTTPS. RSC_WRK_FOLLOW=1 (with several pods): each
# member's heartbeats go straight to the pod that owns its group, as rsc's member runtime sends them
# (the owner each group's answers named during set-up, header Rsc-Group-Owner): one wrk per pod, side
# by side, each with its pod's members and CONNECTIONS/PODS connections, their requests summed. PIN=1 keeps the pods on CPU 0 and
# everything else (Redis, wrk, the proxy, this script) on the other CPUs.
# PROGRESS=none (the default: the lease and the owned shards only), still or moving shapes each
# heartbeat as scripts/bench-members.sh does (moving is that script's default): moving adds
# revokingShards and a shardProgress entry per owned shard whose lastDeliveredId is new in every
# heartbeat, so that every heartbeat changes what the coordinator stores.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/local.sh
pin_pods "$PWD/scripts/wrk-heartbeats.sh" "$@"
groups=${1:-100} per=${2:-10} secs=${3:-5} conns=${4:-8} threads=${5:-2}
case ${PROGRESS:-none} in none|still|moving) ;; *) echo "wrk-heartbeats: PROGRESS is none, still or moving" >&2; exit 2 ;; esac
export RSC_WRK_PROGRESS=${PROGRESS:-none}
command -v wrk >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
local_init wrk
start_redis
npods=${RSC_WRK_PODS:-1}
podpids=() backends=""
# RSC_WRK_HTTPS=1: the pods serve HTTPS (a certificate made here for 127.0.0.1) and wrk speaks it.
scheme=http tlsArgs=()
if [ "${RSC_WRK_HTTPS:-0}" = 1 ]; then
  make_pod_tls
  scheme=https tlsArgs=("${pod_tls_args[@]}")
  export RSC_WRK_CA="$tls_ca"
fi
for i in $(seq 1 "$npods"); do
  p=$(free_port)
  "${pin[@]}" "${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}" --listen "127.0.0.1:$p" --redis "127.0.0.1:$rport" \
    --default-shard-count 16 --member-lease-ttl-ms 600000 "${tlsArgs[@]}" ${RSC_POD_ARGS:-} 2>"$dir/pod$i.log" &
  pids+=($!)
  podpids+=($!)
  backends="${backends:+$backends,}127.0.0.1:$p"
done
wait_pods_ready "$npods"
wait_pods_serving "$npods"
[ -z "$pin_note" ] || echo "wrk: $pin_note"
port=${backends##*:}
if [ "$npods" -gt 1 ]; then
  port=$(free_port)
  ./build/rsc-proxy --listen "127.0.0.1:$port" --backends "$backends" 2>"$dir/proxy.log" &
  pids+=($!)
  for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  echo "wrk: $npods pods behind rsc-proxy"
fi
python3 scripts/lib/settle-members.py "$scheme://127.0.0.1:$port" orders "$groups" "$per" "$dir/members.txt"
tck=$(getconf CLK_TCK)
# cpu_seconds FILE: the CPU seconds (user + system) of the waited-for children in a `times` output
# (taken in the shell that waited for wrk: `times` in a pipe or $(...) would speak for a new subshell).
cpu_seconds() { awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%.6f", t }' "$1"; }
run() {  # run NAME WRK_ARGS...: prints "NAME: N requests, coordinator CPU X us per request, R Redis calls per request, ..."
  local name=$1 c0 c1 r0 r1 out n
  shift
  c0=$(pods_cpu_ticks) r0=$(redis_stat "$rport" total_commands_processed)
  times >"$dir/times0"
  out=$(RSC_WRK_MEMBERS="$dir/members.txt" wrk --latency -t"$threads" -c"$conns" -d"${secs}s" "$@")
  times >"$dir/times1"
  c1=$(pods_cpu_ticks) r1=$(redis_stat "$rport" total_commands_processed)
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  echo "$out" | grep -E 'Requests/sec|Non-2xx|Socket errors|^ +99%|answers not OK' | sed "s/^/  $name: /"
  # wrk's own CPU too: it shares the machine's cores with the pod and Redis (as rsc-load does).
  awk -v n="$n" -v c=$((c1 - c0)) -v t="$tck" -v name="$name" -v r=$((r1 - r0 - 2)) -v w0="$(cpu_seconds "$dir/times0")" -v w1="$(cpu_seconds "$dir/times1")" \
    'BEGIN { printf "%s: %d requests, coordinator CPU %.1f us per request, %.2f Redis calls per request, load generator (wrk) %.1f us per request\n", name, n, c * 1e6 / t / n, r / n, (w1 - w0) * 1e6 / n }'
}
# run_follow NAME: every pod's members' heartbeats at that pod, one wrk per pod at the same time.
run_follow() {
  local name=$1 c0 c1 r0 r1 n=0 owner i=0 wpids=() files=()
  while read -r owner; do
    i=$((i + 1))
    awk -v o="$owner" 'NR == FNR { if ($2 == o) g[$1] = 1; next } ($2 in g)' "$dir/members.txt.owners" "$dir/members.txt" > "$dir/members.$i.txt"
    files+=("$owner")
  done < <(awk '{print $2}' "$dir/members.txt.owners" | sort -u)
  c0=$(pods_cpu_ticks) r0=$(redis_stat "$rport" total_commands_processed)
  times >"$dir/times0"
  for i in $(seq 1 ${#files[@]}); do
    RSC_WRK_MEMBERS="$dir/members.$i.txt" wrk --latency -t1 -c$(( (conns + ${#files[@]} - 1) / ${#files[@]} )) -d"${secs}s" \
      -s scripts/lib/wrk-heartbeat.lua "${files[$((i - 1))]}" > "$dir/wrk.$i.out" 2>&1 &
    wpids+=($!)
  done
  wait "${wpids[@]}"
  times >"$dir/times1"
  c1=$(pods_cpu_ticks) r1=$(redis_stat "$rport" total_commands_processed)
  for i in $(seq 1 ${#files[@]}); do
    n=$((n + $(awk '/requests in/ {print $1}' "$dir/wrk.$i.out")))
    grep -E 'Requests/sec|Non-2xx|Socket errors|^ +99%|answers not OK' "$dir/wrk.$i.out" | sed "s#^#  $name (${files[$((i - 1))]}): #"
  done
  awk -v n="$n" -v c=$((c1 - c0)) -v t="$tck" -v name="$name" -v r=$((r1 - r0 - 2)) -v w0="$(cpu_seconds "$dir/times0")" -v w1="$(cpu_seconds "$dir/times1")" -v s="$secs" \
    'BEGIN { printf "%s: %d requests (%.0f/s), coordinator CPU %.1f us per request, %.2f Redis calls per request, load generator (wrk) %.1f us per request\n", name, n, n / s, c * 1e6 / t / n, r / n, (w1 - w0) * 1e6 / n }'
}
forwarded_total() {  # the calls every pod forwarded to a group's owner (their /metrics)
  local b t=0
  for b in ${backends//,/ }; do
    t=$(( t + $(curl -s ${RSC_WRK_CA:+--cacert "$RSC_WRK_CA"} "$scheme://$b/metrics" | awk '/^rsc_forwarded_calls_total\{/ {s += $2} END {printf "%d", s}') ))
  done
  echo "$t"
}
echo "wrk: heartbeats with progress $RSC_WRK_PROGRESS"
f0=$(forwarded_total)
if [ "${RSC_WRK_FOLLOW:-0}" = 1 ]; then
  echo "wrk: each group's heartbeats straight to its owner ($(awk '{print $2}' "$dir/members.txt.owners" | sort | uniq -c | tr '\n' ' '))"
  hb=$(run_follow heartbeat | tee /dev/stderr | tail -1)
else
  hb=$(run heartbeat -s scripts/lib/wrk-heartbeat.lua "$scheme://127.0.0.1:$port" | tee /dev/stderr | tail -1)
fi
f1=$(forwarded_total)
echo "$hb" | awk -v f=$((f1 - f0)) '{ for (i = 1; i <= NF; i++) if ($i == "requests" || $i == "requests,") n = $(i - 1) }
  END { printf "wrk: forwarded by a pod to the group'"'"'s owner: %.3f per heartbeat\n", f / n }'
hz=$(run healthz "$scheme://127.0.0.1:$port/healthz" | tee /dev/stderr | tail -1)
echo "$hb" | awk -v other="$hz" '{ for (i = 1; i <= NF; i++) if ($i == "CPU") h = $(i + 1) }
  END { split(other, o, " "); for (i = 1; i <= length(o); i++) if (o[i] == "CPU") z = o[i + 1];
        printf "wrk: coordinator CPU %.1f us per steady heartbeat, %.1f us per /healthz (ratio %.2f)\n", h, z, z / h }'
for b in ${backends//,/ }; do
  echo "pod $b: $(curl -s ${RSC_WRK_CA:+--cacert "$RSC_WRK_CA"} "$scheme://$b/metrics" | grep -E '^rsc_heartbeats_unwritten_total|^rsc_copy_checks_total' | tr '\n' ' ')"
done
