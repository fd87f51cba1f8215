#!/usr/bin/env bash
# rsc-admin against a real coordinator with auth on (run by ctest): every command, its table and
# JSON output, its exit codes (0 done, 1 refused, 2 bad usage, 3 unreachable), --help, and the
# audit line each admin call leaves in the coordinator's log, refused calls included. A private
# redis-server and one pod, stopped by pid.
#   bash scripts/check-admin.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-./build}
admin=$B/rsc-admin
. scripts/lib/local.sh
local_init admin
start_redis
port=$(free_port)
adminToken=admin-token-0123456789abcdef memberToken=member-token-0123456789abcdef
cat >"$dir/config.json" <<JSON
{"auth": {"tokens": [
  {"name": "ops", "token": "$adminToken", "role": "admin"},
  {"token": "$memberToken", "role": "member"}]}}
JSON
"$B/rsc-coordinator" --config "$dir/config.json" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" \
  --member-lease-ttl-ms 60000 --rebalance-timeout-ms 60000 --scale-in-grace-ms 60000 2>"$dir/pod.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.05; done
url=http://127.0.0.1:$port
python3 scripts/lib/handover.py "$url" orders billing "$adminToken" >"$dir/handover.json"

failures=0
check() {  # check DESCRIPTION EXPECTED_EXIT COMMAND...: runs it, keeps stdout/stderr in $out/$err
  local what=$1 want=$2
  shift 2
  set +e
  "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  set -e
  out=$(cat "$dir/out") err=$(cat "$dir/err")
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, want $want; stdout: $out; stderr: $err" >&2
    failures=$((failures + 1))
  fi
}
expect() {  # expect DESCRIPTION TEXT HAYSTACK
  if ! grep -qF -- "$2" <<<"$3"; then
    echo "FAIL: $1: '$2' not in: $3" >&2
    failures=$((failures + 1))
  fi
}
A=("$admin" --coordinator "$url")
export RSC_TOKEN=$adminToken

check "list-streams" 0 "${A[@]}" list-streams
expect "list-streams names orders" orders "$out"
check "list-groups" 0 "${A[@]}" list-groups orders
# a table (GROUP LAG PENDING) when the shard streams could be read, else the names alone
listed=$(printf '%s\n' "$out" | awk '$1 != "GROUP" {print $1}')
[ "$listed" = billing ] || { echo "FAIL: list-groups printed '$out'" >&2; failures=$((failures + 1)); }
check "describe" 0 "${A[@]}" describe orders billing
expect "describe: the heading" "GROUP orders/billing" "$out"
expect "describe: the shard table" "SHARD  OWNER  STATE" "$out"
expect "describe: the member table" "MEMBER  STATE" "$out"
expect "describe: progress of shard 0" "1700000000000-7" "$out"
expect "describe: a lag line, from the lag round or saying it is not read yet" "LAG " "$out"
check "describe --fresh" 0 "${A[@]}" describe orders billing --fresh
expect "describe: the lag read from Redis now, members or not" "LAG 0 records, 0 delivered and not acked (read from Redis now)" "$out"
expect "describe: Redis's figures per shard" "REDIS-LAG" "$out"
for s in $(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["moving"])))' "$dir/handover.json"); do
  row=$(grep -E "^$s +" <<<"$out" || true)
  expect "describe: shard $s is handed from m1 to m2" "m1     REVOKING->m2" "$row"
done
for m in m1 m2; do expect "describe: member $m" "$m " "$(grep -E "^$m " <<<"$out" || true)"; done
check "describe --output json" 0 "${A[@]}" describe orders billing --output json
python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["shards"]) == 4 and d["consumerGroup"] == "billing"' <<<"$out" ||
  { echo "FAIL: describe --output json is not the group's JSON" >&2; failures=$((failures + 1)); }

check "create-stream" 0 "${A[@]}" create-stream payments 4 --key-style hashtag
expect "create-stream says so" "stream payments: 4 shards, key style hashtag, metadata version 1 (created)" "$out"
check "create-stream of another size is refused" 1 "${A[@]}" create-stream payments 8
expect "refusal names the conflict" "CONFLICT" "$err"
check "grow-stream" 0 "${A[@]}" grow-stream payments 8
expect "grow-stream says so" "8 shards" "$out"
check "grow-stream cannot shrink" 1 "${A[@]}" grow-stream payments 2
check "describe of no group" 1 "${A[@]}" describe orders nosuch
expect "404 message" "no such group: orders/nosuch" "$err"
check "delete-group with live members" 1 "${A[@]}" delete-group orders billing
expect "409 message" "GROUP_NOT_EMPTY" "$err"
check "remove-member" 0 "${A[@]}" remove-member orders billing m2
expect "remove-member says FENCED" "member m2 of orders/billing: FENCED" "$out"
check "remove-member of no member" 1 "${A[@]}" remove-member orders billing nobody

# Tokens: none, a member's (not for admin calls), from --token rather than the environment.
check "no token" 1 env -u RSC_TOKEN "${A[@]}" list-streams
expect "401 said" "HTTP 401" "$err"
check "a member token may read" 0 env -u RSC_TOKEN "${A[@]}" --token "$memberToken" list-groups orders
check "a member token may not delete" 1 env -u RSC_TOKEN "${A[@]}" --token "$memberToken" delete-group orders billing --fence-members
expect "403 said" "HTTP 403" "$err"
# A token from a file (--token-file, RSC_TOKEN_FILE): never on the command line.
printf '%s\n' "$adminToken" >"$dir/admin-token"
printf '%s\n' "$memberToken" >"$dir/member-token"
check "--token-file" 0 env -u RSC_TOKEN "${A[@]}" --token-file "$dir/admin-token" list-streams
expect "--token-file: the streams listed" orders "$out"
check "RSC_TOKEN_FILE" 0 env -u RSC_TOKEN RSC_TOKEN_FILE="$dir/admin-token" "${A[@]}" list-streams
check "--token-file over RSC_TOKEN" 1 "${A[@]}" --token-file "$dir/member-token" delete-group orders billing --fence-members
expect "--token-file's member token is the one presented" "HTTP 403" "$err"
# Dead letters, as a member runtime writes them (see docs/guide.md: records that keep failing).
dead='rsc:{orders/billing}:dead'
d1=$(redis-cli -p "$rport" XADD "$dead" '*' id 1-1 shard 0 stream orders:0 deliveries 5 error 'cannot parse' \
  member m1 at 1700000000000 field:key k1 field:seq 7)
redis-cli -p "$rport" XADD "$dead" '*' id 1-2 shard 1 stream orders:1 deliveries 1 error 'schema 9' member m2 at 1700000000001 \
  field:key k2 field:seq 8 >/dev/null
check "describe counts dead letters" 0 "${A[@]}" describe orders billing
expect "describe: DEAD-LETTERS" "DEAD-LETTERS 2" "$out"
check "dead-letters" 0 "${A[@]}" dead-letters orders billing
expect "dead-letters: the count" "DEAD LETTERS of orders/billing: 2" "$out"
expect "dead-letters: a row" "$d1  0      1-1        5           1700000000000  m1      cannot parse" "$out"
check "dead-letters --count 1 --output json" 0 "${A[@]}" dead-letters orders billing --count 1 --output json
expect "dead-letters json: one of two" '"total": 2' "$out"
[ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["deadLetters"]))' <<<"$out")" = 1 ] ||
  { echo "FAIL: --count 1 listed more than one" >&2; failures=$((failures + 1)); }
check "a member token may not list dead letters" 1 env -u RSC_TOKEN "${A[@]}" --token "$memberToken" dead-letters orders billing
check "redrive names none" 2 "${A[@]}" redrive orders billing
check "--all elsewhere" 2 "${A[@]}" describe orders billing --all
check "redrive --id" 0 "${A[@]}" redrive orders billing --id "$d1"
expect "redrive says how many" "1 dead letter(s) of orders/billing written back" "$out"
[ "$(redis-cli -p "$rport" XLEN "$dead")" = 1 ] || { echo "FAIL: redrive --id left $(redis-cli -p "$rport" XLEN "$dead")" >&2; failures=$((failures + 1)); }
expect "the record is back at the end of its shard" "k1" "$(redis-cli -p "$rport" XREVRANGE orders:0 + - COUNT 1)"
expect "and says where it came from" "rsc:redrive:deadLetterId
$d1" "$(redis-cli -p "$rport" XREVRANGE orders:0 + - COUNT 1)"
check "redrive of an id that is not there" 1 "${A[@]}" redrive orders billing --id 1-999
expect "redrive names the missing id" "not in the dead-letter stream of orders/billing: 1-999" "$err"
check "dead-letters of no such group" 1 "${A[@]}" dead-letters orders nobody
expect "dead-letters: 404 as describe" "HTTP 404 NOT_FOUND" "$err"
check "redrive for no such group" 1 "${A[@]}" redrive orders nobody --all
expect "redrive: 404" "HTTP 404 NOT_FOUND" "$err"
check "redrive --all" 0 "${A[@]}" redrive orders billing --all
[ "$(redis-cli -p "$rport" XLEN "$dead")" = 0 ] || { echo "FAIL: redrive --all left dead letters" >&2; failures=$((failures + 1)); }
expect "the second one too" "k2" "$(redis-cli -p "$rport" XREVRANGE orders:1 + - COUNT 1)"
# Discarding: by id (one not there is named, exit 1), then all; nothing is written back.
d3=$(redis-cli -p "$rport" XADD "$dead" '*' id 1-3 shard 2 stream orders:2 deliveries 5 error 'poison' member m1 at 1700000000002 field:key k3)
redis-cli -p "$rport" XADD "$dead" '*' id 1-4 shard 2 stream orders:2 deliveries 5 error 'poison' member m1 at 1700000000003 field:key k4 >/dev/null
len2=$(redis-cli -p "$rport" XLEN orders:2)
check "discard-dead-letters names none" 2 "${A[@]}" discard-dead-letters orders billing
check "discard-dead-letters --id" 0 "${A[@]}" discard-dead-letters orders billing --id "$d3"
expect "discard says how many" "1 dead letter(s) of orders/billing discarded" "$out"
check "discard an id that is not there" 1 "${A[@]}" discard-dead-letters orders billing --id "$d3"
expect "discard names the missing id" "not in the dead-letter stream of orders/billing: $d3" "$err"
check "discard-dead-letters --all" 0 "${A[@]}" discard-dead-letters orders billing --all
[ "$(redis-cli -p "$rport" XLEN "$dead")" = 0 ] || { echo "FAIL: discard --all left dead letters" >&2; failures=$((failures + 1)); }
[ "$(redis-cli -p "$rport" XLEN orders:2)" = "$len2" ] || { echo "FAIL: a discard wrote records back" >&2; failures=$((failures + 1)); }

# Kafka's --reset-offsets: refused while members read, done once they are fenced.
check "reset-offsets with live members" 1 "${A[@]}" reset-offsets orders billing --to latest
expect "reset-offsets: why" "GROUP_NOT_EMPTY" "$err"
check "reset-offsets needs --to" 2 "${A[@]}" reset-offsets orders billing
check "reset-offsets --to nonsense" 1 "${A[@]}" reset-offsets orders billing --to yesterday --fence-members
check "reset-offsets --fence-members" 0 "${A[@]}" reset-offsets orders billing --to 1700000000000-5 --fence-members
expect "reset-offsets says where" 'position 1700000000000-5 (1700000000000-5) on 4 shard streams' "$out"
expect "XGROUP SETID on each shard" "1700000000000-5" "$(redis-cli -p "$rport" XINFO GROUPS orders:3)"

# Retention: shown, set, refused with a reason; the audit trail names it.
check "retention" 0 "${A[@]}" retention orders
expect "retention: none at first" "stream orders: retention none" "$out"
check "set-retention max-len" 0 "${A[@]}" set-retention orders max-len=100000
expect "set-retention says so" "stream orders: retention maxLen 100000" "$out"
check "retention after" 0 "${A[@]}" retention orders
expect "retention: kept" "retention maxLen 100000" "$out"
check "set-retention too short an age" 1 "${A[@]}" set-retention orders max-age-ms=10
expect "set-retention: why" "at least 1000" "$err"
check "set-retention nonsense" 2 "${A[@]}" set-retention orders forever
check "set-retention on no stream" 1 "${A[@]}" set-retention nope none
check "set-retention processed" 0 "${A[@]}" set-retention orders processed-by-all-groups
expect "set-retention processed says so" "retention processedByAllGroups" "$out"
check "set-retention none" 0 "${A[@]}" set-retention orders none


# Fewer shards: scale in, what describe shows while shards drain, one change at a time, rollback.
check "scale in" 0 "${A[@]}" scale orders 2 --reason "quiet season"
expect "scale says what drains" "stream orders: 2 shards routed to, 2 draining (read until every group has read and acked them, then retired); migration v2 draining (4 -> 2)" "$out"
check "describe while draining" 0 "${A[@]}" describe orders billing
expect "describe: the migration" "SCALING 4 -> 2 shards (migration v2): 2 shard(s) draining" "$out"
expect "describe: shard 3 drains" "DRAINING (waiting for" "$(grep -E '^3 ' <<<"$out" || true)"
check "describe json: phases" 0 "${A[@]}" describe orders billing --output json
[ "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(",".join(s["phase"] for s in d["shards"]))' <<<"$out")" = "ACTIVE,ACTIVE,DRAINING,DRAINING" ] ||
  { echo "FAIL: describe json phases: $out" >&2; failures=$((failures + 1)); }
check "a second change while draining" 1 "${A[@]}" scale orders 3
expect "refused: one at a time" "ACTIVE_MIGRATION_EXISTS" "$err"
check "scale --rollback" 0 "${A[@]}" scale --rollback orders
expect "rolled back" "stream orders: 4 shards routed to; migration v2 rolled back (4 -> 2 undone)" "$out"
check "nothing left to roll back" 1 "${A[@]}" scale --rollback orders
expect "refused: nothing drains" "ROLLBACK_NOT_ALLOWED" "$err"
check "scale needs a count" 2 "${A[@]}" scale orders
check "scale to a negative count" 2 "${A[@]}" scale orders -1
check "--rollback elsewhere" 2 "${A[@]}" describe orders billing --rollback
check "--wait elsewhere" 2 "${A[@]}" describe orders billing --wait
# scale --wait: a growth is over at once (and says it grew, not "DEPRECATED"); a shrink the group's
# members do not drain (these are not reading) is still going when the wait ends: exit 4.
check "scale up --wait" 0 "${A[@]}" scale orders 6 --wait
expect "scale up: done, grown" "migration v4 done (grown 4 -> 6)" "$out"
check "scale down --wait, not drained in time" 4 "${A[@]}" scale orders 5 --wait --wait-timeout-ms 1500
expect "scale --wait: why it stopped" "still draining after 1500 ms" "$err"
check "scale --rollback after the wait" 0 "${A[@]}" scale --rollback orders

# Shard racks on the stream: listed, the same again, refused with a reason, cleared.
check "set-stream-racks" 0 "${A[@]}" set-stream-racks orders eu-1a,,eu-1b
expect "set-stream-racks says so" "stream orders: racks of 3 shard(s): eu-1a,,eu-1b, metadata version now" "$out"
check "set-stream-racks again" 0 "${A[@]}" set-stream-racks orders eu-1a,,eu-1b
expect "set-stream-racks: unchanged" "(unchanged)" "$out"
expect "get stream: racks" '"eu-1b"' "$(curl -sf -H "Authorization: Bearer $adminToken" "$url/coord/v1/streams/orders")"
check "set-stream-racks from zones, none configured" 1 "${A[@]}" set-stream-racks orders --from-cluster-zones
expect "from zones: why" "--redis-node-zones" "$err"
check "set-stream-racks bad name" 1 "${A[@]}" set-stream-racks orders "eu 1a"
expect "bad rack: why" "shardRacks[0]: 'eu 1a'" "$err"
check "set-stream-racks on no stream" 1 "${A[@]}" set-stream-racks nope eu-1a
check "set-stream-racks clears" 0 "${A[@]}" set-stream-racks orders ""
expect "cleared" "stream orders: no shard racks" "$out"
check "set-stream-racks: a list and the rule" 2 "${A[@]}" set-stream-racks orders eu-1a --from-cluster-zones
check "--from-cluster-zones elsewhere" 2 "${A[@]}" retention orders --from-cluster-zones
# A store away answers 503 with Retry-After: a read is asked again after it and succeeds.
kill -STOP "$rpid"
( sleep 3; kill -CONT "$rpid" ) &
cont=$!
check "a read rides out a store away for 3 s" 0 "${A[@]}" list-groups orders
expect "it said it would try again" "trying again in 1 s" "$err"
wait "$cont"

check "delete-group --fence-members" 0 "${A[@]}" delete-group orders billing --fence-members
expect "delete-group says so" "group orders/billing deleted" "$out"

# Usage: exit 2 with a hint; --help everywhere exits 0; a coordinator that is not there exits 3.
check "no command" 2 "${A[@]}"
check "unknown command" 2 "${A[@]}" frobnicate
check "missing argument" 2 "${A[@]}" describe orders
expect "usage hint" "usage: rsc-admin [options] describe STREAM GROUP" "$err"
check "bad shard count" 2 "${A[@]}" create-stream s zero
check "bad output" 2 "${A[@]}" list-streams --output yaml
check "--fence-members elsewhere" 2 "${A[@]}" describe orders billing --fence-members
check "--help" 0 "${A[@]}" --help
for c in list-streams list-groups describe create-stream grow-stream scale remove-member delete-group dead-letters redrive discard-dead-letters reset-offsets retention set-retention set-stream-racks; do
  check "$c --help" 0 "${A[@]}" "$c" --help
  expect "$c --help shows its usage" "usage: rsc-admin [options] $c" "$out"
done
check "unreachable" 3 "$admin" --coordinator "http://127.0.0.1:$(free_port)" list-streams

# The audit trail: one line per admin call, refused ones too, with the caller's name; no token.
audits=$(grep ' audit ' "$dir/pod.log" || true)
n=$(grep -c ' audit ' <<<"$audits" || true)
[ "$n" -eq 39 ] || { echo "FAIL: $n audit lines, want 39 (the setup's stream + 38 admin calls):" >&2; echo "$audits" >&2; failures=$((failures + 1)); }
expect "audit: created" 'caller=ops action=create-stream target=payments status=201 outcome="ok shardCount=4' "$audits"
expect "audit: refused by the store" 'caller=ops action=create-stream target=payments status=409 outcome="refused CONFLICT' "$audits"
expect "audit: grown" 'caller=ops action=put-stream target=payments status=200 outcome="ok shardCount=8' "$audits"
expect "audit: stream racks" 'caller=ops action=set-stream-racks target=orders status=200' "$audits"
expect "audit: stream racks refused" 'caller=ops action=set-stream-racks target=orders status=409' "$audits"
expect "audit: member removed" 'caller=ops action=remove-member target=orders/billing/m2 status=200' "$audits"
expect "audit: unnamed token, refused" 'caller=token#1 action=delete-group target=orders/billing status=403' "$audits"
expect "audit: retention set" 'caller=ops action=set-retention target=orders status=200' "$audits"
expect "audit: retention refused" 'caller=ops action=set-retention target=orders status=400' "$audits"
expect "audit: deleted" 'caller=ops action=delete-group target=orders/billing status=200 outcome="ok deleted=true"' "$audits"
expect "audit: redriven" 'caller=ops action=redrive-dead-letters target=orders/billing status=200 outcome="ok redriven=1 notFound=[]"' "$audits"
expect "audit: a redrive of an id not there" 'caller=ops action=redrive-dead-letters target=orders/billing status=200 outcome="ok redriven=0 notFound=[\"1-999\"]"' "$audits"
expect "audit: discarded" 'caller=ops action=discard-dead-letters target=orders/billing status=200 outcome="ok discarded=1 notFound=[]"' "$audits"
expect "audit: reset refused" 'caller=ops action=reset-offsets target=orders/billing status=409 outcome="refused GROUP_NOT_EMPTY' "$audits"
expect "audit: scaled" 'caller=ops action=scale-stream target=orders status=202' "$audits"
expect "audit: scale refused" 'caller=ops action=scale-stream target=orders status=409 outcome="refused ACTIVE_MIGRATION_EXISTS' "$audits"
expect "audit: rolled back" 'caller=ops action=rollback-scale target=orders status=202' "$audits"
expect "audit: rollback refused" 'caller=ops action=rollback-scale target=orders status=422' "$audits"
expect "audit: reset" 'caller=ops action=reset-offsets target=orders/billing status=200 outcome="ok position=\"1700000000000-5\" shards=4"' "$audits"
if grep -q -e "$adminToken" -e "$memberToken" "$dir/pod.log"; then
  echo "FAIL: a token is in the log" >&2
  failures=$((failures + 1))
fi
echo "check-admin: $failures failure(s); audit lines:"
echo "$audits" | sed 's/^/  /'
[ "$failures" -eq 0 ]
