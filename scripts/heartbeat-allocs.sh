#!/usr/bin/env bash
# Heap allocations per heartbeat, thread by thread: runs scripts/bench-members.sh for one size
# (PIN=1 by default, every heartbeat written: --lease-renewal-slack-ms 0), and while its load runs
# counts the pod's calls of glibc's malloc and free for a few seconds with perf's uprobes, divided
# by the heartbeats the pod answered meanwhile (its rsc_heartbeats_total). Uprobes slow each call a
# lot, so the heartbeats per second of that run mean nothing; the counts per heartbeat do. Needs
# root and linux-perf; the probes it adds are removed at exit.
#   bash scripts/heartbeat-allocs.sh [MEMBERSxGROUPS] [SECONDS_COUNTED]
# RSC_COORDINATOR_BIN picks another build (to compare two side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-20000x2000} secs=${2:-4}
bin=${RSC_COORDINATOR_BIN:-./build/rsc-coordinator}
libc=$(ldd "$bin" | awk '/libc\.so/ {print $3}')
[ -n "$libc" ] || { echo "heartbeat-allocs: cannot find the coordinator's libc" >&2; exit 2; }
out=$(mktemp -d /tmp/rsc-allocs.XXXXXX)
bench=""
cleanup() {
  [ -z "$bench" ] || kill -TERM "$bench" 2>/dev/null || true
  [ -z "$bench" ] || wait "$bench" 2>/dev/null || true
  perf probe -q -d 'probe_libc:malloc' -d 'probe_libc:free' 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
perf probe -q -d 'probe_libc:malloc' -d 'probe_libc:free' 2>/dev/null || true  # left by an interrupted run
perf probe -q -x "$libc" malloc
perf probe -q -x "$libc" free
PIN=${PIN:-1} RSC_POD_ARGS="${RSC_POD_ARGS:---lease-renewal-slack-ms 0}" \
  bash scripts/bench-members.sh "$size" 0 $((secs + 20)) 1 16 >"$out/bench.log" 2>&1 &
bench=$!
pod=""
for _ in $(seq 1 100); do
  pod=$(pgrep -P "$bench" -x "$(basename "$bin" | cut -c1-15)" | head -1 || true)
  [ -n "$pod" ] && break
  sleep 0.2
done
[ -n "$pod" ] || { echo "heartbeat-allocs: the pod did not start" >&2; cat "$out/bench.log" >&2; exit 1; }
# The load starts after the joins and three settling rounds: wait until heartbeats flow fast.
url=""
answered() { curl -fsS "$url/metrics" | awk '/^rsc_heartbeats_total/ {s += $2} END {print s + 0}'; }
for _ in $(seq 1 300); do
  [ -n "$url" ] || url=$(ss -ltnpH | awk -v p="pid=$pod," 'index($0, p) {print "http://" $4; exit}')
  if [ -n "$url" ]; then
    a=$(answered); sleep 1; b=$(answered)
    # settled: every member joined and sent its three settling rounds, and answers flow
    [ $((b - a)) -gt 1000 ] && [ "$b" -gt $(( ${size%x*} * 4 )) ] && { sleep 5; break; }
  else
    sleep 0.5
  fi
done
before=$(answered)
perf stat -e probe_libc:malloc,probe_libc:free --per-thread -p "$pod" -o "$out/stat.txt" -- sleep "$secs" >/dev/null 2>&1
after=$(answered)
n=$((after - before))
[ "$n" -gt 0 ] || { echo "heartbeat-allocs: no heartbeat answered while counting" >&2; exit 1; }
echo "heartbeat-allocs: $size, $n heartbeats answered in the ${secs} s counted (pod $pod, every heartbeat written)"
awk -v n="$n" '$2 ~ /^[0-9,]+$/ && $3 ~ /^probe_libc:/ {
    v = $2; gsub(",", "", v); ev = substr($3, 12)
    th = $1; sub(/-[0-9]+$/, "", th)
    per[th " " ev] += v; tot[ev] += v
  }
  END {
    for (k in per) if (per[k] / n >= 0.05) printf "  %-34s %6.2f per heartbeat\n", k, per[k] / n
    printf "  all threads: malloc %.2f, free %.2f per heartbeat\n", tot["malloc"] / n, tot["free"] / n
  }' "$out/stat.txt" | sort
