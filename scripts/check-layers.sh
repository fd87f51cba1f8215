#!/usr/bin/env bash
# The dependency arrows, enforced: each part's headers are compiled where only the folders it may
# use are visible, so an include of anything else fails here (run by every build whose headers
# changed, and by ctest).
#   - protocol/ and group/ (the pure core): protocol/ and group/ only;
#   - the Redis client (redis/result, connection, cluster, client, keys): protocol/ and redis/,
#     never group/ — a negative control checks that redis/store.hpp (which needs group/) is refused;
#   - the HTTP surface (http/api.hpp: routing, auth, the Backend it calls): protocol/ and http/;
#   - the member runtime (member/): protocol/, redis/'s client, member/ and log/.
#   bash scripts/check-layers.sh [C++ COMPILER [STAMP FILE written on success]]
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-c++}
stamp=${2:-}  # given (by the build): only failures are printed
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# view NAME DIR...: a directory where only DIR... of the project are visible.
view() {
  local name=$1
  shift
  mkdir -p "$tmp/$name"
  for d in "$@"; do ln -s "$root/$d" "$tmp/$name/$d"; done
}
compiles() {  # compiles VIEW HEADER
  echo "#include \"$2\"" | "$cxx" -std=c++17 -fsyntax-only -I"$tmp/$1" -x c++ - 2>"$tmp/err"
}
must() {  # must VIEW HEADER...
  local v=$1
  shift
  for h in "$@"; do
    if compiles "$v" "$h"; then
      [ -n "$stamp" ] || echo "ok   $h sees only what it may ($v)"
    else
      echo "FAIL $h includes what $v may not: $(grep -m1 'fatal error' "$tmp/err" || head -1 "$tmp/err")"
      fail=1
    fi
  done
}

view core protocol group
view client protocol redis
view member protocol redis member log
view http protocol http

must core protocol/types.hpp protocol/codec.hpp group/state.hpp group/coordinator.hpp group/pod_authority.hpp \
  group/time_rules.hpp group/freshness.hpp group/notify.hpp group/describe.hpp group/cached_group.hpp \
  group/recent_events.hpp group/assignor.hpp group/reconcile.hpp
must client redis/result.hpp redis/connection.hpp redis/cluster.hpp redis/client.hpp redis/keys.hpp
must http http/api.hpp
must member member/membership.hpp member/runtime.hpp member/shard_reader.hpp member/heartbeat_client.hpp \
  member/http_client.hpp
# The negative control: the check does refuse what a part may not include.
if compiles client redis/store.hpp; then
  echo "FAIL the check would not catch the Redis client including group/ (redis/store.hpp compiled without it)"
  fail=1
else
  [ -n "$stamp" ] || echo "ok   redis/store.hpp (the store of group state) is refused where only the client may be used"
fi
if [ $fail = 0 ] && [ -n "$stamp" ]; then touch "$stamp"; fi
exit $fail
