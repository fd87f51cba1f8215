#!/usr/bin/env bash
# Keeps the alert rules and the dashboard honest (run by ctest): promtool checks and unit-tests the
# rules, and every rsc_* metric the rules and the dashboard query must exist in the /metrics of a
# real coordinator (a private redis-server and one pod, a member joined, all stopped by pid).
#   bash scripts/check-observability.sh [RSC_COORDINATOR_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-./build/rsc-coordinator}
rules=deploy/prometheus/rsc-alerts.yml
dashboard=deploy/grafana/rsc-dashboard.json
promtool check rules "$rules"
(cd deploy/prometheus && promtool test rules rsc-alerts.test.yml)
python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$dashboard"

. scripts/lib/local.sh
local_init observability
start_redis
port=$(free_port)
"$bin" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" 2>"$dir/pod.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.05; done
curl -sf -X POST "localhost:$port/coord/v1/streams/orders/groups/billing/members/m1/heartbeat" \
  -H 'Content-Type: application/json' -d '{"protocolVersion":1,"requestId":"r1","memberId":"m1","memberEpoch":0,
  "metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}' >/dev/null
curl -sf "localhost:$port/metrics" >"$dir/metrics.txt"

missing=0 checked=0
for name in $( (grep -o 'rsc_[a-z_]*' "$rules"; grep -o 'rsc_[a-z_]*' "$dashboard") | sort -u); do
  base=$name
  case $name in *_bucket | *_sum | *_count) base=${name%_*} ;; esac
  checked=$((checked + 1))
  if grep -qE "^(# TYPE $base |$name[{ ])" "$dir/metrics.txt"; then continue; fi
  echo "check-observability: $name is queried but $bin does not export it" >&2
  missing=$((missing + 1))
done
echo "check-observability: $checked metric names queried by the rules and the dashboard, $missing missing"
[ "$missing" -eq 0 ]
