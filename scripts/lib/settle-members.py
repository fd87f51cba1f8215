#!/usr/bin/env python3
"""Joins members and lets their groups settle, for load generators that only send steady heartbeats.

    python3 scripts/lib/settle-members.py URL STREAM GROUPS MEMBERS_PER_GROUP OUT

Creates STREAM (16 shards); in each group g0..g{GROUPS-1}, members m0..m{N-1} join and heartbeat
(giving up what they are told to, taking what they are given) until the group is STABLE. Writes one
line per member to OUT: "STREAM GROUP MEMBER EPOCH SHARD,SHARD,...". Exits non-zero if a group does
not settle within 60 rounds.
"""
import json
import os
import ssl
import sys
import urllib.request

url, stream, groups, per, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
seq = 0
# An https:// URL is verified against RSC_WRK_CA when given (a certificate made for the run).
tls = ssl.create_default_context(cafile=os.environ.get("RSC_WRK_CA")) if url.startswith("https://") else None


def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=5, context=tls) as r:
        return json.loads(r.read() or b"null")


def beat(group, m):
    global seq
    seq += 1
    body = {"protocolVersion": 1, "requestId": "settle-%d" % seq, "memberId": m["id"], "memberEpoch": m["epoch"],
            "metadataVersion": 1, "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 4, "availableConcurrency": 4},
            "ownedShards": [{"shardIndex": s, "state": "OWNED"} for s in m["owned"]]}
    r = call("POST", "/coord/v1/streams/%s/groups/%s/members/%s/heartbeat" % (stream, group, m["id"]), body)
    if r["status"] in ("OK", "REVOKE_PENDING"):
        if r["memberEpoch"] > 0:
            m["epoch"] = r["memberEpoch"]
        m["owned"] = sorted(s["shardIndex"] for s in r["assignment"]["assignedShards"])
    else:
        raise SystemExit("%s/%s: %s answered %s" % (group, m["id"], m["id"], r["status"]))


call("PUT", "/coord/v1/streams/" + stream, {"shardCount": 16})
lines = []
for g in range(groups):
    group = "g%d" % g
    ms = [{"id": "m%d" % i, "epoch": 0, "owned": []} for i in range(per)]
    for m in ms:
        beat(group, m)
    for _ in range(60):
        for m in ms:
            beat(group, m)
        d = call("GET", "/coord/v1/streams/%s/groups/%s" % (stream, group))
        if d["state"] == "STABLE" and all(m["owned"] == sorted(x["assignedShards"]) for m in ms
                                          for x in d["members"] if x["memberId"] == m["id"]):
            break
    else:
        raise SystemExit("group %s did not settle" % group)
    for m in ms:
        lines.append("%s %s %s %d %s" % (stream, group, m["id"], m["epoch"], ",".join(str(s) for s in m["owned"])))
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("settled %d groups x %d members" % (groups, per))
