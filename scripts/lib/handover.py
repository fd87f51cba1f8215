#!/usr/bin/env python3
"""Puts a group in the middle of a handover, for the checks of rsc-admin and the status page.

    python3 scripts/lib/handover.py URL STREAM GROUP [TOKEN]

Creates STREAM with 4 shards, m1 joins and reads all four (reporting progress on shard 0 each time), m2
joins, and m1 is told to give two shards up and does not answer yet: those two are REVOKING by m1
and pending for m2. Prints the shard owners it expects as JSON: {"0": "m1", ...} and the shards in
handover. Exits non-zero when the coordinator does not answer as the protocol says.
"""
import json
import sys
import urllib.request

url, stream, group = sys.argv[1:4]
token = sys.argv[4] if len(sys.argv) > 4 else ""
seq = 0


def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def hb(member, epoch, owned=(), progress=()):
    global seq
    seq += 1
    body = {"protocolVersion": 1, "requestId": f"{member}-{seq}", "memberId": member, "memberEpoch": epoch,
            "metadataVersion": 1, "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 4, "availableConcurrency": 4},
            "ownedShards": [{"shardIndex": s, "state": "OWNED"} for s in owned], "shardProgress": list(progress)}
    status, r = call("POST", f"/coord/v1/streams/{stream}/groups/{group}/members/{member}/heartbeat", body)
    if status != 200:
        sys.exit(f"handover: heartbeat of {member} answered HTTP {status}: {r}")
    return r


def assigned(r):
    shards = (r.get("assignment") or {}).get("assignedShards") or []
    return sorted(s["shardIndex"] if isinstance(s, dict) else s for s in shards)


status, _ = call("POST", f"/coord/v1/streams/{stream}", {"initialShardCount": 4})
if status not in (200, 201):
    sys.exit(f"handover: creating {stream} answered HTTP {status}")
progress = [{"shardIndex": 0, "lastDeliveredId": "1700000000000-7", "pending": 3, "lag": 12}]  # what m1 reads
m1 = hb("m1", 0)
m1 = hb("m1", m1["memberEpoch"], assigned(m1), progress)
if assigned(m1) != [0, 1, 2, 3]:
    sys.exit(f"handover: m1 should read all four shards, got {m1}")
m2 = hb("m2", 0)
r = hb("m1", m1["memberEpoch"], [0, 1, 2, 3], progress)
if r["status"] != "REVOKE_PENDING":
    sys.exit(f"handover: m1 should be asked to give shards up, got {r}")
kept = assigned(r)
moving = [s for s in range(4) if s not in kept]
m2 = hb("m2", m2["memberEpoch"])
print(json.dumps({"owners": {str(s): "m1" for s in range(4)}, "moving": moving, "kept": kept}))
