#!/usr/bin/env bash
# Many groups on one stream: GROUPS coordinator groups on a 16-shard stream (one member
# joined each, so each has its Redis consumer group on every shard), one pod sampling the lag every
# second. Prints describe's latency (p50/p99 over 200 calls, default and ?fresh=true) and its Redis
# work per call (INFO commandstats: calls and microseconds of the commands issued per describe), and
# the list of the stream's groups whole and one page of 1000 (time and size).
# A private redis-server and coordinator on free loopback ports; everything is stopped by pid.
#   bash scripts/bench-many-groups.sh [GROUPS]
set -euo pipefail
cd "$(dirname "$0")/.."
groups=${1:-10000}
. scripts/lib/local.sh
local_init many-groups
start_redis
port=$(free_port)
./build/rsc-coordinator --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" --lag-interval-ms 1000 \
  --member-lease-ttl-ms 600000 --rebalance-timeout-ms 600000 2>"$dir/pod1.log" &
pids+=($!)
wait_pods_ready 1
python3 - "$port" "$rport" "$groups" <<'PY'
import http.client, json, statistics, subprocess, sys, time
port, rport, groups = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def call(method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()
def redis(*args):
    return subprocess.run(["redis-cli", "-p", str(rport), *args], capture_output=True, text=True, check=True).stdout
assert call("PUT", "/coord/v1/streams/wide", {"shardCount": 16})[0] == 200
t = time.time()
for g in range(groups):
    st, body = call("POST", f"/coord/v1/streams/wide/groups/g{g:05d}/members/m/heartbeat",
                    {"protocolVersion": 1, "requestId": f"r{g}", "memberId": "m", "memberEpoch": 0, "metadataVersion": 0,
                     "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 1, "availableConcurrency": 1}, "ownedShards": []})
    assert st == 200, body
print(f"{groups} groups joined in {time.time() - t:.1f} s")
# Their consumer groups are made when shards are handed out; wait for the lag round to have read them all.
for _ in range(600):
    st, body = call("GET", "/coord/v1/streams/wide/groups?limit=1")
    j = json.loads(body)
    if j.get("lagReadAt") and j["groupLag"] and j["groupLag"][0]["unknownShards"] == 0:
        break
    time.sleep(0.5)
def stats():
    out = {}
    for line in redis("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line.split(":", 1)
            f = dict(kv.split("=") for kv in rest.split(","))
            out[name] = (int(f["calls"]), int(f["usec"]))
    return out
def describe_run(path, n):
    redis("CONFIG", "RESETSTAT")
    lat = []
    for i in range(n):
        t = time.perf_counter()
        st, body = call("GET", path % (i * 7919 % groups))
        lat.append((time.perf_counter() - t) * 1000)
        assert st == 200, body
    s = stats()
    mine = {k: v for k, v in s.items() if v[0] >= n and k not in ("cmdstat_info", "cmdstat_config|resetstat")}
    calls = sum(v[0] for v in mine.values()) / n
    usec = sum(v[1] for v in mine.values()) / n
    lat.sort()
    return statistics.median(lat), lat[int(0.99 * (n - 1))], calls, usec
for label, path, n in (("describe", "/coord/v1/streams/wide/groups/g%05d", 200),
                       ("describe ?fresh=true", "/coord/v1/streams/wide/groups/g%05d?fresh=true", 20)):
    p50, p99, calls, usec = describe_run(path, n)
    print(f"{label} at {groups} groups x 16 shards: p50 {p50:.2f} ms, p99 {p99:.2f} ms, {calls:.1f} Redis calls and {usec:.0f} us of Redis time per call")
for label, path in (("list, all groups", "/coord/v1/streams/wide/groups"), ("list, one page of 1000", "/coord/v1/streams/wide/groups?limit=1000")):
    t = time.perf_counter()
    st, body = call("GET", path)
    ms = (time.perf_counter() - t) * 1000
    assert st == 200
    print(f"{label}: {ms:.0f} ms, {len(body) / 1000:.0f} kB, {len(json.loads(body)['groups'])} groups")
PY
