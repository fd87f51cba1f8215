#!/usr/bin/env bash
# The local stack end to end (run by ctest): deploy/local/up.sh in a temp dir with a 1 s scrape,
# a few members heartbeating through the pods, then Prometheus' HTTP API must report all three
# pods up and sum(rsc_heartbeats_total) growing; deploy/local/down.sh must stop every process.
#   bash scripts/check-local-stack.sh [RSC_COORDINATOR_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
export RSC_LOCAL_DIR
RSC_LOCAL_DIR=$(mktemp -d /tmp/rsc-local-check.XXXXXX)
export RSC_COORDINATOR_BIN=${1:-$(pwd)/build/rsc-coordinator}
export SCRAPE_INTERVAL=1s
cleanup() { bash deploy/local/down.sh >/dev/null || true; rm -rf "$RSC_LOCAL_DIR"; }
trap cleanup EXIT
bash deploy/local/up.sh
. "$RSC_LOCAL_DIR/stack.env"
query() {  # the value of an instant query's first sample, or the number of samples with COUNT
  curl -sf "127.0.0.1:$PROMETHEUS_PORT/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
if sys.argv[1] == "COUNT": print(len(r))
else: print(r[0]["value"][1] if r else "none")' "${2:-VALUE}"
}
join() {  # join PORT MEMBER: a (re)join heartbeat; it must be answered 200
  curl -sf -o /dev/null -X POST "127.0.0.1:$1/coord/v1/streams/orders/groups/billing/members/$2/heartbeat" \
    -H 'Content-Type: application/json' -d "{\"protocolVersion\":1,\"requestId\":\"$2-$RANDOM$RANDOM\",\"memberId\":\"$2\",
    \"memberEpoch\":0,\"metadataVersion\":0,\"runtimeConsumerCapacity\":{\"runtimeMaxConcurrency\":1,\"availableConcurrency\":1},
    \"ownedShards\":[]}"
}
read -r -a ports <<<"$POD_PORTS"
drive() {  # ROUNDS: three members, each round through every pod
  for _ in $(seq 1 "$1"); do
    for m in m1 m2 m3; do
      for p in "${ports[@]}"; do join "$p" "$m"; done
    done
  done
}
drive 2
up=none
for _ in $(seq 1 60); do
  up=$(query 'sum(up{job="rsc"})')
  [ "$up" = 3 ] && break
  sleep 0.5
done
[ "$up" = 3 ] || { echo "check-local-stack: Prometheus sees $up of 3 pods up" >&2; exit 1; }
first=none
for _ in $(seq 1 40); do
  first=$(query 'sum(rsc_heartbeats_total)')
  [ "$first" != none ] && break
  sleep 0.5
done
drive 3
grew=no
for _ in $(seq 1 40); do
  now=$(query 'sum(rsc_heartbeats_total)')
  if [ "$now" != none ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)" "$first" "$now"; then
    grew=yes
    break
  fi
  sleep 0.5
done
[ "$grew" = yes ] || { echo "check-local-stack: sum(rsc_heartbeats_total) stayed at $first" >&2; exit 1; }
rules=$(curl -sf "127.0.0.1:$PROMETHEUS_PORT/api/v1/rules" | python3 -c 'import json, sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')
echo "check-local-stack: 3 pods up, sum(rsc_heartbeats_total) $first -> $now, $rules alert rules loaded"
[ "$rules" -ge 7 ] || { echo "check-local-stack: only $rules rules loaded" >&2; exit 1; }
mapfile -t started < <(awk '{print $1}' "$RSC_LOCAL_DIR/pids")
bash deploy/local/down.sh >/dev/null
for pid in "${started[@]}"; do
  if kill -0 "$pid" 2>/dev/null; then echo "check-local-stack: pid $pid still running after down.sh" >&2; exit 1; fi
done
echo "check-local-stack: down.sh stopped all ${#started[@]} processes"
