#!/usr/bin/env python3
"""An external assignor: splits a group's shards by each member's capacity (runtimeMaxConcurrency)
and posts the split whenever the group epoch moves.  The group's assignor must be `external`
(rsc-admin set-assignor STREAM GROUP external).  Standard library only.
  weighted-controller.py URL STREAM GROUP [--token T] [--seconds N]"""
import argparse, json, time, urllib.error, urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url"), ap.add_argument("stream"), ap.add_argument("group")
ap.add_argument("--token", default=""), ap.add_argument("--seconds", type=float, default=0, help="stop after N s (0: never)")
a = ap.parse_args()
path = f"{a.url}/coord/v1/streams/{a.stream}/groups/{a.group}"

def call(method, url, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    if a.token: req.add_header("Authorization", "Bearer " + a.token)
    try:
        with urllib.request.urlopen(req, timeout=5) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try: return e.code, json.loads(e.read() or b"{}")
        except ValueError: return e.code, {}
    except (OSError, ValueError) as e: return 0, {"message": str(e)}  # unreachable or not JSON: next round

def weighted(members, free):  # largest remainder: member m gets about len(free) * w_m / sum(w)
    w = {m["memberId"]: max(1, m["runtimeConsumerCapacity"]["runtimeMaxConcurrency"]) for m in members}
    n, total, ids = len(free), sum(w.values()), sorted(w)
    quota = {i: n * w[i] // total for i in ids}
    for i in sorted(ids, key=lambda i: -(n * w[i] % total))[:n - sum(quota.values())]: quota[i] += 1
    out, nxt = {}, 0
    for i in ids: out[i], nxt = free[nxt:nxt + quota[i]], nxt + quota[i]
    return out

done_for, until = None, time.time() + a.seconds if a.seconds else float("inf")
while time.time() < until:
    status, d = call("GET", path)
    live = [m for m in d.get("members", []) if m["state"] not in ("EXPIRED", "FENCED", "LEAVING")] if status == 200 else []
    if status == 200 and d.get("assignor") == "external" and live and d["groupEpoch"] != done_for:
        # Shards reserved for a static member that is away, or retiring, are not the controller's.
        free = [s["shardIndex"] for s in d["shards"] if "reservedFor" not in s and s.get("phase") != "RETIRING"]
        target = weighted(live, free)
        code, r = call("PUT", path + "/target", {"groupEpoch": d["groupEpoch"], "targetAssignment": target})
        print(f"epoch {d['groupEpoch']}: {code} {json.dumps(target) if code == 200 else r.get('message')}", flush=True)
        if code == 200: done_for = d["groupEpoch"]
    time.sleep(0.5)
