#!/usr/bin/env bash
# More pods, more capacity: the steady-heartbeat figures of one pod, of three pods whose
# members follow the Rsc-Group-Owner header (each group's heartbeats straight to its owner), and of
# three pods behind rsc-proxy with members that ignore it (a Service only: two calls in three are
# forwarded), side by side in one run and with both load generators: rsc-load (scripts/load.sh,
# RSC_LOAD_FOLLOW=1) and wrk (scripts/wrk-heartbeats.sh, RSC_WRK_FOLLOW=1). Each run starts its own
# redis-server and pods on free loopback ports and stops them by pid. Prints one table: heartbeats/s,
# coordinator CPU per heartbeat (summed over the pods) and its ratio to the one-pod figure of the
# same generator, calls forwarded per heartbeat, p99.
#   bash scripts/bench-owner-direct.sh [GROUPS] [MEMBERS_PER_GROUP] [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
groups=${1:-200} per=${2:-5} secs=${3:-8} conns=${4:-32}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rows=()
# load NAME PODS FOLLOW
load() {
  RSC_LOAD_FOLLOW=$3 bash scripts/load.sh "$2" "$groups" "$per" 8 "$secs" > "$out/$1" 2>&1 || true
  grep '^rsc-load: row ' "$out/$1" | tail -1 | tr ' ' '\n' |
    awk -F= -v name="$1" '$1 == "hbps" {h = $2} $1 == "cpu_us" {c = $2} $1 == "forwarded" {f = $2} $1 == "p99_ms" {p = $2}
      END { printf "%s %s %s %s %s\n", name, h, c, f, p }'
}
# wrkrun NAME PODS FOLLOW
wrkrun() {
  # Through a pipe: the script tees to /dev/stderr, which reopened on a file would truncate it.
  RSC_WRK_PODS=$2 RSC_WRK_FOLLOW=$3 bash scripts/wrk-heartbeats.sh "$groups" "$per" "$secs" "$conns" 2 2>&1 | cat > "$out/$1" || true
  awk -v name="$1" -v s="$secs" '
    /^heartbeat: / { n = $2; for (i = 1; i <= NF; i++) if ($i == "CPU") c = $(i + 1) }
    /forwarded by a pod/ { f = $(NF - 2) }
    /heartbeat.*99%/ { p = $NF }
    END { printf "%s %d %s %s %s\n", name, n / s, c, f, p }' "$out/$1"
}
# The rows: generator, pods, whether members follow the header, and the pod link (off: each
# forwarded call an HTTP exchange of its own, as before the link).
for r in "load 1pod 1 0 true" "load 3pods-following 3 1 true" "load 3pods-service 3 0 true" "load 3pods-service-nolink 3 0 false" \
         "wrkrun 1pod 1 0 true" "wrkrun 3pods-following 3 1 true" "wrkrun 3pods-service 3 0 true" "wrkrun 3pods-service-nolink 3 0 false"; do
  set -- $r
  line=$(RSC_POD_LINK=$5 $1 "$1-$2" "$3" "$4")
  echo "ran: $line" >&2
  rows+=("$line")
done
printf '\n| generator, pods | heartbeats/s | coordinator CPU µs/hb | × one pod | forwarded/hb | p99 |\n|---|---|---|---|---|---|\n'
for row in "${rows[@]}"; do
  set -- $row ""  ""  ""  ""
  gen=${1%%-*} base=$(printf '%s\n' "${rows[@]}" | awk -v g="$gen-1pod" '$1 == g {print $3}')
  awk -v n="$1" -v h="$2" -v c="$3" -v f="$4" -v p="$5" -v b="$base" \
    'BEGIN { printf "| %s | %d | %.1f | %.2f | %s | %s |\n", n, h, c, (b > 0 ? c / b : 0), f, p }'
done
