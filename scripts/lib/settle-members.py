#!/usr/bin/env python3
"""Joins members and lets their groups settle, for load generators that only send steady heartbeats.

    python3 scripts/lib/settle-members.py URL STREAM GROUPS MEMBERS_PER_GROUP OUT

Creates STREAM (16 shards); in each group g0..g{GROUPS-1}, members m0..m{N-1} join and heartbeat
(giving up what they are told to, taking what they are given) until the group has settled. Writes one
line per member to OUT: "STREAM GROUP MEMBER EPOCH SHARD,SHARD,...". Exits non-zero if a group does
not settle within 60 rounds. Groups settle side by side (RSC_SETTLE_THREADS, default 16). The lines
go member by member across the groups (m0 of every group, then m1, ...), so that a load generator
walking the file sends consecutive heartbeats to different groups, as independent members do, and
does not hand one group a run of heartbeats to write together. Writes OUT.owners too: one line per
group, "GROUP OWNER_URL", the pod that owns it as the last answer named it (header Rsc-Group-Owner;
"-" when none did), for load generators that send a group's heartbeats straight to its owner.
"""
import concurrent.futures
import itertools
import json
import os
import ssl
import sys
import time
import urllib.request

url, stream, groups, per, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
SHARDS = 16
seq = itertools.count(1)
# An https:// URL is verified against RSC_WRK_CA when given (a certificate made for the run).
tls = ssl.create_default_context(cafile=os.environ.get("RSC_WRK_CA")) if url.startswith("https://") else None


owners = {}  # group -> the owner pod its last answer named


def call(method, path, body=None, group=None):
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=5, context=tls) as r:
        if group is not None:
            owners[group] = r.headers.get("Rsc-Group-Owner") or "-"
        return json.loads(r.read() or b"null")


def beat(group, m):
    body = {"protocolVersion": 1, "requestId": "settle-%d" % next(seq), "memberId": m["id"], "memberEpoch": m["epoch"],
            "metadataVersion": 1, "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 4, "availableConcurrency": 4},
            "ownedShards": [{"shardIndex": s, "state": "OWNED"} for s in m["owned"]]}
    for attempt in range(20):  # RETRY (the group's write did not finish in time): the same call again, as a member does
        r = call("POST", "/coord/v1/streams/%s/groups/%s/members/%s/heartbeat" % (stream, group, m["id"]), body, group)
        if r["status"] != "RETRY":
            break
        time.sleep(0.05 * (attempt + 1))
    m["status"] = r["status"]
    if r["status"] in ("OK", "REVOKE_PENDING"):
        if r["memberEpoch"] > 0:
            m["epoch"] = r["memberEpoch"]
        m["owned"] = sorted(s["shardIndex"] for s in r["assignment"]["assignedShards"])
    else:
        raise SystemExit("%s/%s: %s answered %s" % (group, m["id"], m["id"], r["status"]))


def settle(g):
    group = "g%d" % g
    ms = [{"id": "m%d" % i, "epoch": 0, "owned": []} for i in range(per)]
    for m in ms:
        beat(group, m)
    for _ in range(60):
        before = [m["owned"] for m in ms]
        for m in ms:
            beat(group, m)
        # Settled: a whole round answered OK with nothing to give up, every shard owned by exactly one
        # member, and nobody's shards changed in the round. (Not the group's GET: its lag reading lists
        # every group of each shard stream, which with thousands of groups is the dearest call there is.)
        owned = sorted(x for m in ms for x in m["owned"])
        if all(m["status"] == "OK" for m in ms) and owned == list(range(SHARDS)) and before == [m["owned"] for m in ms]:
            break
    else:
        raise SystemExit("group %s did not settle" % group)
    return ["%s %s %s %d %s" % (stream, group, m["id"], m["epoch"], ",".join(str(s) for s in m["owned"])) for m in ms]


call("PUT", "/coord/v1/streams/" + stream, {"shardCount": SHARDS})
with concurrent.futures.ThreadPoolExecutor(int(os.environ.get("RSC_SETTLE_THREADS", "16"))) as pool:
    settled = list(pool.map(settle, range(groups)))
lines = [settled[g][i] for i in range(per) for g in range(groups)]
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
with open(out + ".owners", "w") as f:
    f.write("".join("g%d %s\n" % (g, owners.get("g%d" % g, "-")) for g in range(groups)))
print("settled %d groups x %d members" % (groups, per))
