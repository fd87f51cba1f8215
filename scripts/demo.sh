#!/usr/bin/env bash
# A demo of rsc on one machine: a private redis-server, two coordinator pods, three consumers and
# a producer. It prints the group's assignment, stops one consumer, and prints it again so the
# rebalance can be seen. Everything it starts is stopped by pid at the end. Needs a build
# (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
B=./build
KEEP_DIR=1
. scripts/lib/local.sh
local_init demo
start_redis
podA=$(free_port); podB=$(free_port)
timing=(--tick-interval-ms 200 --heartbeat-interval-ms 500 --member-lease-ttl-ms 3000 --rebalance-timeout-ms 5000)
$B/rsc-coordinator --listen "127.0.0.1:$podA" --redis "127.0.0.1:$rport" "${timing[@]}" 2>"$dir/podA.log" &
pids+=($!)
$B/rsc-coordinator --listen "127.0.0.1:$podB" --redis "127.0.0.1:$rport" "${timing[@]}" 2>"$dir/podB.log" &
pids+=($!)
sleep 0.5
curl -s -X PUT "localhost:$podA/coord/v1/streams/orders" -H 'Content-Type: application/json' -d '{"shardCount": 12}'
echo
show() {
  echo "--- $1"
  curl -s "localhost:$podB/coord/v1/streams/orders/groups/billing" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("group state:", d["state"], " groupEpoch:", d["groupEpoch"])
for m in d["members"]:
    print("  %-10s %-9s assigned=%s pending=%s revoking=%s" % (m["memberId"], m["state"], m["assignedShards"], m["pendingShards"], m["revokingShards"]))
' 2>/dev/null || echo "(describe unavailable)"
}
consumer=()
for i in 1 2 3; do
  pod=$([ $((i % 2)) -eq 0 ] && echo "$podB" || echo "$podA")
  $B/rsc-consume --coordinator "http://127.0.0.1:$pod" --redis "127.0.0.1:$rport" --stream orders --group billing \
    --member-id "consumer-$i" --process-ms 5 --log "$dir/consumer-$i.jsonl" 2>"$dir/consumer-$i.log" &
  pids+=($!)
  consumer+=($!)
done
$B/rsc-produce --redis "127.0.0.1:$rport" --stream orders --coordinator "http://127.0.0.1:$podA" --count 3000 \
  --rate 300 >"$dir/producer.log" 2>&1 &
pids+=($!)
sleep 3
show "three consumers share 12 shards"
echo "--- stopping consumer-2 gracefully (SIGTERM: it leaves with epoch -1 and hands its shards back)"
kill -TERM "${consumer[1]}"
sleep 2
show "after consumer-2 left"
sleep 6
processed=$(cat "$dir"/consumer-*.jsonl 2>/dev/null | grep -c '"seq"' || true)
echo "--- records processed so far: $processed of 3000"
