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
# Every alert has a unit test that expects it to fire (not only one that expects silence).
python3 - "$rules" deploy/prometheus/rsc-alerts.test.yml <<'PY'
import sys, yaml
alerts = [r["alert"] for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"] if "alert" in r]
fired = {t["alertname"] for g in yaml.safe_load(open(sys.argv[2]))["tests"] for t in g.get("alert_rule_test", [])
         if t.get("exp_alerts")}
missing = [a for a in alerts if a not in fired]
print(f"check-observability: {len(alerts)} alerts, each with a test that fires it" if not missing
      else f"check-observability: alerts no test fires: {missing}")
sys.exit(1 if missing else 0)
PY
# The dashboard: lag and pending as Redis reports them (members or not), a dead-letter panel, and
# stream/group variables that every per-group query honours.
python3 - "$dashboard" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
names = {v["name"] for v in d["templating"]["list"]}
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
problems = []
if not {"stream", "group"} <= names: problems.append("no stream and group variables")
for metric in ("rsc_stream_group_lag", "rsc_stream_group_pending", "rsc_group_dead_letters"):
    if not any(metric + "{" in e for e in exprs): problems.append(f"no panel on {metric}")
for e in exprs:
    if re.search(r"rsc_(stream_)?group_[a-z_]+\{", e) and not ('$stream' in e and '$group' in e):
        problems.append(f"a per-group query ignores the stream/group variables: {e}")
if problems:
    print("check-observability: dashboard: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"check-observability: dashboard: {len(d['panels'])} panels, variables {sorted(names)}")
PY

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
