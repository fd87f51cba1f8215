#!/usr/bin/env bash
# A bounded heartbeat load on this machine: a private redis-server and N coordinator pods on free
# loopback ports, then rsc-load against them; everything is stopped by pid at the end. Prints
# heartbeats/s, /healthz req/s on the same connections and their ratio, latency, errors, Redis
# commands and reads per heartbeat and the pods' RSS per member.
# RSC_COORDINATOR_BIN picks another build of the coordinator (to compare two side by side).
# RSC_LOAD_PROXY=1 puts rsc-proxy (a round-robin TCP proxy, as a Kubernetes Service) in front of
# the pods: the load generator then knows one URL and its connections are spread over the pods.
# RSC_LOAD_HTTPS=1: the pods serve HTTPS (and forward to each other over it) and rsc-load speaks it.
# RSC_LOAD_FOLLOW=1: each member sends its heartbeats to the pod that owns its group, as rsc's member
# runtime does (rsc-load --follow-owner; the Rsc-Group-Owner header of the answers); else they go to
# the pods round robin (as through a Service, or from clients that ignore the header).
#   bash scripts/load.sh [PODS] [GROUPS] [MEMBERS_PER_GROUP] [THREADS] [SECONDS] [STORE_CONNECTIONS] [INTERVAL_MS]
# INTERVAL_MS > 0: each member heartbeats every INTERVAL_MS (an offered rate) instead of as fast as
# answers come; the pods then use it as their heartbeat interval and a lease of 5 intervals.
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-1} groups=${2:-100} per=${3:-10} threads=${4:-8} secs=${5:-5} conns=${6:-1} interval=${7:-0}
. scripts/lib/local.sh
local_init load
start_redis
urls="" podpids=""
timing=() tlsArgs=() scheme=http loadTls=()
if [ "${RSC_LOAD_HTTPS:-0}" = 1 ]; then
  make_pod_tls
  tlsArgs=("${pod_tls_args[@]}") scheme=https loadTls=(--coordinator-ca-file "$tls_ca")
fi
[ "$interval" -gt 0 ] && timing=(--heartbeat-interval-ms "$interval" --member-lease-ttl-ms $((5 * interval)))
for i in $(seq 1 "$pods"); do
  port=$(free_port)
  "${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --store-connections "$conns" \
    --default-shard-count 16 "${timing[@]}" "${tlsArgs[@]}" ${RSC_POD_ARGS:-} 2>"$dir/pod$i.log" &
  pids+=($!)
  podpids="${podpids:+$podpids,}$!"
  urls="${urls:+$urls,}$scheme://127.0.0.1:$port"
done
wait_pods_ready "$pods"
wait_pods_serving "$pods"
if [ "${RSC_LOAD_PROXY:-0}" = 1 ]; then
  pport=$(free_port)
  ./build/rsc-proxy --listen "127.0.0.1:$pport" --backends "$(echo "$urls" | sed 's#https\?://##g')" 2>"$dir/proxy.log" &
  pids+=($!)
  for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$pport") 2>/dev/null && break; sleep 0.1; done
  urls="$scheme://127.0.0.1:$pport"
  echo "load: $pods pod(s) behind rsc-proxy on port $pport"
fi
# The /healthz baseline runs between the joins and the heartbeats: at most 5 s, well inside a
# lease (a longer one let every member expire before its first heartbeat: one FENCED each).
healthz=$(( secs < 5 ? secs : 5 ))
[ "$interval" -gt 0 ] && healthz=0
./build/benchmarks/rsc-load --coordinator "$urls" --groups "$groups" --members-per-group "$per" --threads "$threads" \
  --seconds "$secs" --interval-ms "$interval" --healthz-seconds "$healthz" --redis "127.0.0.1:$rport" --pids "$podpids" "${loadTls[@]}" \
  $([ "${RSC_LOAD_FOLLOW:-0}" = 1 ] && echo --follow-owner)
