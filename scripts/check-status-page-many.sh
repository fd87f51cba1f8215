#!/usr/bin/env bash
# The status page with many groups (run by ctest): GROUPS groups (1000 by
# default) on one 16-shard stream, one member each, a pod sampling the lag every second. Headless
# Chromium loads the page once (its refreshes within the virtual time budget counted); the rendered
# DOM must show every group, and Redis's own count (INFO commandstats) bounds the Redis time one
# refresh costs: at most REDIS_MS_PER_REFRESH (100 ms by default). Prints the figures.
#   bash scripts/check-status-page-many.sh [BUILD_DIR] [GROUPS]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-./build}
groups=${2:-1000}
budgetMs=${REDIS_MS_PER_REFRESH:-100}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "check-status-page-many: chromium is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
. scripts/lib/local.sh
local_init status-page-many
start_redis
port=$(free_port)
"$B/rsc-coordinator" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --member-lease-ttl-ms 600000 \
  --rebalance-timeout-ms 600000 --lag-interval-ms 1000 2>"$dir/pod.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.05; done
python3 - "$port" "$groups" <<'PY'
import http.client, json, sys, time
port, groups = int(sys.argv[1]), int(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def call(method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()
assert call("PUT", "/coord/v1/streams/wide", {"shardCount": 16})[0] == 200
for g in range(groups):
    st, body = call("POST", f"/coord/v1/streams/wide/groups/g{g:05d}/members/m/heartbeat",
                    {"protocolVersion": 1, "requestId": f"r{g}", "memberId": "m", "memberEpoch": 0, "metadataVersion": 0,
                     "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 1, "availableConcurrency": 1}, "ownedShards": []})
    assert st == 200, body
for _ in range(120):  # the lag round has read them (describe's figures come from it)
    j = json.loads(call("GET", "/coord/v1/streams/wide/groups?limit=1")[1])
    if j.get("lagReadAt") and j["groupLag"] and j["groupLag"][0]["unknownShards"] == 0:
        break
    time.sleep(0.5)
else:
    sys.exit("check-status-page-many: the lag round did not read the groups within 60 s")
PY
redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null
start=$(date +%s%N)
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/profile" \
  --virtual-time-budget=3000 --dump-dom "http://127.0.0.1:$port/" >"$dir/dom.html" 2>>"$dir/chromium.log"
wallMs=$((($(date +%s%N) - start) / 1000000))
redis-cli -p "$rport" INFO commandstats >"$dir/stats.txt"
python3 - "$dir/dom.html" "$dir/stats.txt" "$groups" "$budgetMs" "$wallMs" <<'PY'
import re, sys
dom, stats, groups, budget, wall = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
shown = len(set(re.findall(r'data-group="wide/(g\d+)"', dom)))
calls, usec = {}, {}
for line in stats.splitlines():
    m = re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", line)
    if m:
        calls[m.group(1)], usec[m.group(1)] = int(m.group(2)), int(m.group(3))
# Each describe reads its group once (HGETALL of its state): that many describes, so many refreshes.
refreshes = calls.get("hgetall", 0) / groups
# The page's own calls are those made about once per group per refresh; the pod's lag round and
# registry beats (a few calls whatever the page does) are not the page's cost.
page = {k: v for k, v in usec.items() if calls[k] >= groups}
total = sum(usec.values()) / 1000
per = sum(page.values()) / 1000 / refreshes if refreshes else float("inf")
print(f"check-status-page-many: {groups} groups shown {shown}; {refreshes:.2f} refreshes in one headless load "
      f"({wall} ms of Chromium wall time, its start included); {per:.1f} ms of Redis per refresh in "
      f"{', '.join(sorted(page))} (budget {budget} ms); {total:.1f} ms of Redis in all, the lag round's included")
problems = []
if shown != groups: problems.append(f"the page shows {shown} of {groups} groups")
if refreshes < 1: problems.append(f"no whole refresh was counted ({calls.get('hgetall', 0)} group reads)")
if per > budget: problems.append(f"a refresh costs {per:.1f} ms of Redis, over {budget} ms")
if problems:
    sys.exit("check-status-page-many: FAIL: " + "; ".join(problems))
PY
