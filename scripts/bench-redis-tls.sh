#!/usr/bin/env bash
# Redis over TLS against plain TCP, side by side in one run: one redis-server with a
# plain port and a TLS-only port (mutual TLS, certificates made here with openssl). For each mode,
# ROUNDS times, alternating: rsc-produce writes RECORDS records to a fresh 4-shard stream
# (pipelined, as fast as Redis answers), then rsc-consume (4 workers) reads and acks them all; the
# figures are records/s for each. With BASE=DIR (a build directory of an earlier commit, e.g. one
# whose Redis connection was hiredis's own socket) the plain runs are repeated with DIR's binaries,
# to show whether plain TCP kept its speed. Everything is started here and stopped by pid.
#   bash scripts/bench-redis-tls.sh [RECORDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-200000} rounds=${2:-3}
. scripts/lib/local.sh
local_init redis-tls
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=bench-ca -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
for name in server client; do
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
    -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
done
plain=$(free_port)
tls=$(free_port)
redis_up "$plain" --save "" --appendonly no --tls-port "$tls" --tls-cert-file "$dir/server.crt" \
  --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients yes
tlsFlags=(--redis-tls-ca-file "$dir/ca.crt" --redis-tls-cert-file "$dir/client.crt" --redis-tls-key-file "$dir/client.key")

# coordinator BIN_DIR NAME PORT [flags...]: starts one; its URL in $url
coordinator() {
  local bin=$1 name=$2 rp=$3 port
  shift 3
  port=$(free_port)
  "$bin/rsc-coordinator" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rp" "$@" >"$dir/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  url="http://127.0.0.1:$port"
}
now() { date +%s%N; }
# run LABEL BIN_DIR URL REDIS_PORT [redis flags...]: one produce-then-consume round; prints a row
n=0
run() {
  local label=$1 bin=$2 url=$3 rp=$4 t0 t1 t2 done=0 c
  shift 4
  n=$((n + 1))
  local stream="b$n"
  curl -fsS -X PUT "$url/coord/v1/streams/$stream" -H 'Content-Type: application/json' -d '{"shardCount": 4}' >/dev/null
  t0=$(now)
  "$bin/rsc-produce" --redis "127.0.0.1:$rp" "$@" --stream "$stream" --coordinator "$url" --count "$records" \
    --key-space 4096 >"$dir/produce-$n.txt" 2>&1
  t1=$(now)
  "$bin/rsc-consume" --coordinator "$url" --redis "127.0.0.1:$rp" "$@" --stream "$stream" --group g --member-id "c$n" \
    --concurrency 4 --log "$dir/consume-$n.jsonl" 2>"$dir/consume-$n.out" &
  c=$!
  pids+=("$c")
  for _ in $(seq 1 2400); do
    done=$(grep -c '"seq"' "$dir/consume-$n.jsonl" 2>/dev/null || true)
    [ "${done:-0}" -ge "$records" ] && break
    sleep 0.25
  done
  t2=$(now)
  kill -TERM "$c" 2>/dev/null || true
  wait "$c" 2>/dev/null || true
  awk -v l="$label" -v r="$records" -v p=$((t1 - t0)) -v c=$((t2 - t1)) -v d="$done" \
    'BEGIN { printf "%-26s %12.0f %12.0f %10d\n", l, r / (p / 1e9), d / (c / 1e9), d }'
}
coordinator ./build plain "$plain"
plainUrl=$url
coordinator ./build tls "$tls" "${tlsFlags[@]}"
tlsUrl=$url
if [ -n "${BASE:-}" ]; then
  coordinator "$BASE" base "$plain"
  baseUrl=$url
fi
echo "bench-redis-tls: $records records a round, 4 shards, $rounds rounds alternating (records/s)"
printf '%-26s %12s %12s %10s\n' "mode" "produce/s" "consume/s" "consumed"
for r in $(seq 1 "$rounds"); do
  run "plain TCP" ./build "$plainUrl" "$plain"
  run "TLS (mutual)" ./build "$tlsUrl" "$tls" "${tlsFlags[@]}"
  [ -n "${BASE:-}" ] && run "plain TCP, base build" "$BASE" "$baseUrl" "$plain"
done
