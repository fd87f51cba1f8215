#!/usr/bin/env bash
# Two builds of the coordinator side by side under the same heartbeat load, alternating A, B, A,
# B... so that both see the same noise of a shared machine; prints each run's figures and, per
# build, the median of each figure. Every run is scripts/load.sh (its own redis-server and pods,
# stopped by pid).
#   bash scripts/compare-load.sh BIN_A BIN_B [PAIRS] [LOAD.SH ARGUMENTS...]
# e.g. bash scripts/compare-load.sh /tmp/rsc-before ./build/rsc-coordinator 3 1 200 5 32 8
# With COMPARE=members each run is scripts/bench-members.sh instead (runtime-shaped heartbeats;
# give it one size), e.g. PIN=1 COMPARE=members RSC_POD_ARGS="--lease-renewal-slack-ms 0" \
#   bash scripts/compare-load.sh /tmp/rsc-before ./build/rsc-coordinator 4 20000x2000 0 10 1 16
# The coordinator's CPU per heartbeat is also given pair by pair as B/A (the pair saw the same
# noise; the pairs' spread says how far to trust the medians), and with COMPARE=members B/A again
# with each build's CPU over the load generator's CPU in its own run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bash scripts/compare-load.sh BIN_A BIN_B [PAIRS] [LOAD.SH ARGUMENTS...]" >&2; exit 2; }
a=$1 b=$2
shift 2
pairs=${1:-3}
[ $# -gt 0 ] && shift
for bin in "$a" "$b"; do [ -x "$bin" ] || { echo "compare-load: $bin is not an executable" >&2; exit 2; }; done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One figure per line: name value.
figures() {
  sed -n \
    -e 's/.*s: \([0-9]*\) heartbeats\/s.*p99 \([0-9.]*\) .*/heartbeats_per_s \1\np99_ms \2/p' \
    -e 's/.*heartbeat\/healthz \([0-9.]*\).*/ratio_to_healthz \1/p' \
    -e 's/.*coordinator CPU \([0-9.]*\) us per heartbeat.*/coordinator_us_per_heartbeat \1/p' \
    -e 's/.*redis \([0-9.]*\) commands.* and \([0-9.]*\) us of CPU.*/redis_commands \1\nredis_us_per_heartbeat \2/p' \
    -e 's/.*errors \([0-9]*\).*/errors \1/p' \
    -e 's/.*(\([0-9.]*\) bytes per member.*/rss_bytes_per_member \1/p'
}

# bench-members.sh's machine-readable row: "rsc-load: row members=... hbps=... cpu_us=..."
member_figures() {
  grep '^  rsc-load: row \|^rsc-load: row ' | tail -1 | tr ' ' '\n' | awk -F= '
    $1 == "hbps" {print "heartbeats_per_s", $2} $1 == "cpu_us" {print "coordinator_us_per_heartbeat", $2}
    $1 == "redis_calls" {print "redis_commands", $2} $1 == "redis_cpu_us" {print "redis_us_per_heartbeat", $2}
    $1 == "p99_ms" {print "p99_ms", $2} $1 == "errors" {print "errors", $2} $1 == "expired" {print "expired", $2}
    $1 == "bytes_per_member" {print "rss_bytes_per_member", $2}
    $1 == "switches" {print "context_switches_per_heartbeat", $2} $1 == "load_cpu_us" {print "load_gen_us_per_heartbeat", $2}'
}

ratios="" controlled=""
for i in $(seq 1 "$pairs"); do
  for side in A B; do
    bin=$a
    [ "$side" = B ] && bin=$b
    if [ "${COMPARE:-load}" = members ]; then
      RSC_COORDINATOR_BIN=$bin bash scripts/bench-members.sh "$@" > "$out/run.txt" 2>&1 || true
      member_figures < "$out/run.txt" > "$out/$side.$i"
    else
      RSC_COORDINATOR_BIN=$bin bash scripts/load.sh "$@" > "$out/run.txt" 2>&1 || true
      figures < "$out/run.txt" > "$out/$side.$i"
    fi
    echo "run $i $side: $(tr '\n' ' ' < "$out/$side.$i")"
  done
  # B/A raw, and B/A with each build's CPU over the load generator's in the same run: the load
  # generator does the same work per heartbeat for either build, so its CPU per heartbeat moves
  # only with the host (steal, other tenants, where the scheduler put the threads).
  read -r r c < <(cat "$out/A.$i" "$out/B.$i" | awk '
    $1 == "coordinator_us_per_heartbeat" {c[++n] = $2} $1 == "load_gen_us_per_heartbeat" {l[++m] = $2}
    END {
      if (n == 2 && c[1] > 0) printf "%.3f ", c[2] / c[1]; else printf "- "
      if (n == 2 && m == 2 && c[1] > 0 && l[1] > 0 && l[2] > 0) printf "%.3f\n", (c[2] / l[2]) / (c[1] / l[1]); else print "-"
    }')
  ratios="$ratios $r" controlled="$controlled $c"
done

echo "medians over $pairs run(s) each (A = $a, B = $b):"
for name in heartbeats_per_s ratio_to_healthz coordinator_us_per_heartbeat redis_commands redis_us_per_heartbeat context_switches_per_heartbeat load_gen_us_per_heartbeat p99_ms errors expired rss_bytes_per_member; do
  line="  $name"
  for side in A B; do
    m=$(cat "$out"/$side.* | awk -v n="$name" '$1 == n {print $2}' | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    line="$line $side=$m"
  done
  echo "$line"
done
echo "coordinator CPU per heartbeat, B/A pair by pair:$ratios"
if [ "${COMPARE:-load}" = members ]; then
  echo "the same, each over the load generator's CPU per heartbeat in its run:$controlled"
fi
