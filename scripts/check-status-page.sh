#!/usr/bin/env bash
# The status page in a real browser (run by ctest): Debian's chromium, headless, against a real
# coordinator and redis-server with two members in the middle of a handover. The rendered DOM must
# show the stream, the group, both members, the right owner and state of every shard and the
# group's dead letters, and a static member away shows its instance id and reserved shards; with
# auth on and no token, the page shows its sign-in prompt and no data. Screenshots (a laptop and
# a phone) are saved in the temp dir, or in SCREENSHOT_DIR when set.
#   bash scripts/check-status-page.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-./build}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "check-status-page: chromium is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
. scripts/lib/local.sh
local_init status-page
start_redis
shots=${SCREENSHOT_DIR:-$dir}
mkdir -p "$shots"
chrome() {  # chrome ARGS... URL: a throwaway profile each time; bounded in time
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/profile-$RANDOM" \
    --virtual-time-budget=6000 "$@" 2>>"$dir/chromium.log"
}

# 1. Open server: the page shows everything.
port=$(free_port)
"$B/rsc-coordinator" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --member-lease-ttl-ms 60000 \
  --rebalance-timeout-ms 60000 --scale-in-grace-ms 60000 --lag-interval-ms 1000 2>"$dir/pod.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.05; done
python3 scripts/lib/handover.py "http://127.0.0.1:$port" orders billing >"$dir/handover.json"
# Two records its members gave up on, as the member runtime writes them: the page counts them.
for i in 1 2; do
  redis-cli -p "$rport" XADD 'rsc:{orders/billing}:dead' '*' id "1-$i" shard 0 stream orders:0 deliveries 5 \
    error 'cannot parse' member m1 at 1700000000000 field:key "k$i" >/dev/null
done
# Three records on shard 1 nobody has read yet: Redis's lag for the group there is 3.
for i in 1 2 3; do redis-cli -p "$rport" XADD orders:1 '*' key "r$i" >/dev/null; done
# The page shows what the lag round last read (describe's snapshot): wait for the round (1 s here).
for _ in $(seq 1 100); do
  curl -sf "localhost:$port/coord/v1/streams/orders/groups/billing" |
    python3 -c 'import json,sys; sys.exit(0 if (json.load(sys.stdin).get("redisLag") or {}).get("records") == 3 else 1)' && break
  sleep 0.1
done
chrome --dump-dom "http://127.0.0.1:$port/" >"$dir/dom.html"
chrome --window-size=1280,900 --screenshot="$shots/status-laptop.png" "http://127.0.0.1:$port/" >/dev/null
chrome --window-size=390,844 --screenshot="$shots/status-phone.png" "http://127.0.0.1:$port/" >/dev/null

python3 - "$dir/dom.html" "$dir/handover.json" <<'PY'
import json, sys
from html.parser import HTMLParser

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements = []  # (tag, attrs)
        self.text = []
    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
    def handle_data(self, data):
        self.text.append(data)

dom = Dom()
dom.feed(open(sys.argv[1]).read())
expected = json.load(open(sys.argv[2]))
failures = []
def find(**want):
    return [a for t, a in dom.elements if all(a.get(k) == v for k, v in want.items())]
def check(ok, what):
    if not ok:
        failures.append(what)

check(find(**{"data-stream": "orders"}), "the stream orders is shown")
check(find(**{"data-group": "orders/billing"}), "the group orders/billing is shown")
for m in ("m1", "m2"):
    check(find(**{"data-member": m}), f"member {m} is listed")
for s in range(4):
    rows = find(**{"data-shard": str(s)})
    check(len(rows) == 1, f"shard {s} has one row (got {len(rows)})")
    if not rows:
        continue
    r = rows[0]
    check(r.get("data-owner") == "m1", f"shard {s} is read by m1 (page says {r.get('data-owner')!r})")
    if s in expected["moving"]:
        check(r.get("data-state") == "REVOKING" and r.get("data-pending-for") == "m2",
              f"shard {s} is being handed from m1 to m2 (page says {r.get('data-state')}, for {r.get('data-pending-for')!r})")
    else:
        check(r.get("data-state") == "OWNED" and r.get("data-pending-for") == "", f"shard {s} stays with m1")
    want = "3" if s == 1 else "0"
    check(r.get("data-redis-lag") == want, f"shard {s}: Redis's lag {want} is shown (page says {r.get('data-redis-lag')!r})")
text = " ".join(dom.text)
check("1700000000000-7" in text, "shard 0's last delivered id (m1's report) is shown")
check(find(**{"data-kind": "revoke"}), "the recent events show the revocation")
check(find(**{"data-dead-letters": "2"}), "the group's two dead letters are counted")
check(find(**{"data-redis-lag": "3"}), "the group's lag read from Redis (3 records) is shown")
# Each column of the shard table says what it is: no header twice (what Redis holds is marked so).
import re
raw = open(sys.argv[1]).read()
table = re.search(r'<table data-table="shards">.*?</thead>', raw, re.S)
heads = re.findall(r"<th>([^<]*)</th>", table.group(0)) if table else []
check(heads and len(heads) == len(set(heads)), f"the shard table's column headers are distinct (got {heads})")
meta = [t for t in dom.text if "group epoch" in t]
check(any(t.endswith(" 2 members") for t in meta), f"the group counts its 2 live members: {meta}")
if failures:
    print("check-status-page: FAIL:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
print("check-status-page: the DOM shows orders/billing, m1 and m2, each shard's owner and handover, Redis's lag and its 2 dead letters")
PY

# 1b. A shrink in progress: the shards leaving say so (DRAINING), the others stay ACTIVE.
curl -fsS -X POST "http://127.0.0.1:$port/coord/v1/streams/orders/scale" -H 'Content-Type: application/json' \
  -d '{"targetShardCount": 2}' >/dev/null
chrome --dump-dom "http://127.0.0.1:$port/" >"$dir/dom-scale.html"
python3 - "$dir/dom-scale.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
phases = {int(s): p for s, p in re.findall(r'<tr[^>]*data-shard="(\d+)"[^>]*data-phase="(\w+)"', html)}
want = {0: "ACTIVE", 1: "ACTIVE", 2: "DRAINING", 3: "DRAINING"}
if phases != want:
    print(f"check-status-page: FAIL: shard phases while scaling in: {phases}, want {want}", file=sys.stderr)
    sys.exit(1)
if html.count('class="badge DRAINING"') < 2:
    print("check-status-page: FAIL: no DRAINING badge on the draining shards", file=sys.stderr)
    sys.exit(1)
print("check-status-page: while scaling 4 -> 2 the page shows shards 2 and 3 DRAINING, 0 and 1 ACTIVE")
PY

# 1c. A static member away: its instance id, the reservation and the shards reserved for it.
python3 - "http://127.0.0.1:$port" <<'PY'
import json, sys, urllib.request
url = sys.argv[1]
def call(method, path, body):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())
call("PUT", "/coord/v1/streams/clicks", {"shardCount": 2})
def hb(seq, epoch, owned):
    return call("POST", "/coord/v1/streams/clicks/groups/audit/members/s1/heartbeat",
                {"protocolVersion": 1, "requestId": f"s1-{seq}", "memberId": "s1", "memberEpoch": epoch,
                 "metadataVersion": 1, "instanceId": "consumer-7",
                 "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 2, "availableConcurrency": 2},
                 "ownedShards": [{"shardIndex": s, "state": "OWNED"} for s in owned]})
r = hb(1, 0, [])
r = hb(2, r["memberEpoch"], [0, 1])
r = hb(3, -2, [])
if r["status"] != "OK" or r["memberEpoch"] != -2:
    sys.exit(f"check-status-page: FAIL: the -2 leave answered {r}")
PY
chrome --dump-dom "http://127.0.0.1:$port/" >"$dir/dom-static.html"
python3 - "$dir/dom-static.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
problems = []
if 'data-instance="consumer-7"' not in html:
    problems.append("the member's instance id is not shown")
if 'data-reservation="consumer-7"' not in html or "RESERVED for instance consumer-7: shards 0,1" not in html:
    problems.append("the reservation is not shown")
reserved = html.count('data-reserved-for="consumer-7"')
if reserved != 2:
    problems.append(f"{reserved} shard rows say reserved for consumer-7, want 2")
if problems:
    print("check-status-page: FAIL (static member): " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print("check-status-page: a static member away shows its instance id, its reservation and shards 0,1 reserved for it")
PY

# 1e. A rack-aware group: the page names its assignor, the shards read across racks and
# each member's rack with how many of its shards are in it.
python3 - "http://127.0.0.1:$port" <<'PY'
import json, sys, urllib.request
url = sys.argv[1]
def call(method, path, body):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())
call("PUT", "/coord/v1/streams/zones", {"shardCount": 2})
set_ = call("PUT", "/coord/v1/streams/zones/groups/near", {"assignor": "rack-aware", "shardRacks": ["east", "west"]})
if set_.get("assignor") != "rack-aware" or not set_.get("created"):
    sys.exit(f"check-status-page: FAIL: setting the assignor answered {set_}")
def hb(seq, epoch, owned):
    return call("POST", "/coord/v1/streams/zones/groups/near/members/r1/heartbeat",
                {"protocolVersion": 1, "requestId": f"r1-{seq}", "memberId": "r1", "memberEpoch": epoch,
                 "metadataVersion": 1, "rackId": "east",
                 "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 2, "availableConcurrency": 2},
                 "ownedShards": [{"shardIndex": s, "state": "OWNED"} for s in owned]})
r = hb(1, 0, [])
hb(2, r["memberEpoch"], [a["shardIndex"] for a in r["assignment"]["assignedShards"]])
PY
chrome --dump-dom "http://127.0.0.1:$port/" >"$dir/dom-racks.html"
python3 - "$dir/dom-racks.html" <<'PY'
import sys
html = open(sys.argv[1]).read()
problems = []
if 'data-assignor="rack-aware"' not in html or "assignor rack-aware (1 shard read across racks)" not in html:
    problems.append("the group's assignor and its one cross-rack shard are not shown")
if 'data-rack="east"' not in html or "r1 @east (1 in rack)" not in html:
    problems.append("the member's rack and its shards in it are not shown")
if problems:
    print("check-status-page: FAIL (racks): " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print("check-status-page: a rack-aware group shows its assignor, 1 shard read across racks, and r1 @east with 1 in rack")
PY

# 1d. A member fenced by an operator is listed for a while but not counted as a member.
curl -fsS -X DELETE "http://127.0.0.1:$port/coord/v1/streams/orders/groups/billing/members/m2" >/dev/null
chrome --dump-dom "http://127.0.0.1:$port/" >"$dir/dom-fenced.html"
python3 - "$dir/dom-fenced.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
box = re.search(r'data-group="orders/billing".*?</div>', html, re.S)
meta = box.group(0) if box else ""
if "1 members (+1 expired or fenced" not in meta:
    print(f"check-status-page: FAIL: with m2 fenced the group's line should count 1 live member: {meta[-200:]!r}", file=sys.stderr)
    sys.exit(1)
print("check-status-page: a fenced member is not counted among the group's members")
PY

# 2. Auth on, no token: the sign-in prompt, no data.
port2=$(free_port)
cat >"$dir/auth.json" <<'JSON'
{"auth": {"tokens": [{"name": "ops", "token": "admin-token-0123456789abcdef", "role": "admin"}]}}
JSON
"$B/rsc-coordinator" --config "$dir/auth.json" --listen "127.0.0.1:$port2" --redis "127.0.0.1:$rport" 2>"$dir/pod2.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "localhost:$port2/readyz" >/dev/null && break; sleep 0.05; done
chrome --dump-dom "http://127.0.0.1:$port2/" >"$dir/dom-auth.html"
chrome --window-size=1280,900 --screenshot="$shots/status-login.png" "http://127.0.0.1:$port2/" >/dev/null
python3 - "$dir/dom-auth.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
login = re.search(r'<section id="login"[^>]*>', html)
problems = []
if not login or "hidden" in login.group(0):
    problems.append("the sign-in prompt is not shown")
if "data-group=" in html or "data-stream=" in html or "billing" in html.split("<script")[0]:
    problems.append("data is shown without a token")
if problems:
    print("check-status-page: FAIL (auth): " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print("check-status-page: with auth on and no token the page asks for one and shows no data")
PY
for f in status-laptop.png status-phone.png status-login.png; do
  [ -s "$shots/$f" ] || { echo "check-status-page: no screenshot $f" >&2; exit 1; }
done
echo "check-status-page: screenshots in $shots: $(cd "$shots" && ls -1 status-*.png | tr '\n' ' ')"
