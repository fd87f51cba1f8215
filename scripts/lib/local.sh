# Shared by the scripts that start private services on this machine (source it): a temp dir,
# every started pid remembered and stopped (TERM, then wait) on exit, free loopback ports, and a
# private redis-server. Set KEEP_DIR=1 before sourcing to keep the temp dir (logs) at exit.
local_init() {  # local_init NAME
  dir=$(mktemp -d "/tmp/rsc-$1.XXXXXX")
  pids=()
  trap local_cleanup EXIT
}
local_cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP_DIR:-0}" = 1 ]; then echo "logs are in $dir"; else rm -rf "$dir"; fi
}
pin_pods() {  # pin_pods SCRIPT ARGS...: with PIN=1, re-runs SCRIPT on CPUs 1-N and sets pin=(taskset -c 0)
  # for the pods, so that a pod's threads wake each other on one CPU, not across CPUs; else pin=()
  pin=() pin_note=""
  [ "${PIN:-0}" = 1 ] || return 0
  local ncpu=${RSC_BENCH_NCPU:-$(nproc)} script=$1
  shift
  [ "$ncpu" -ge 2 ] || { echo "$(basename "$script"): PIN=1 needs at least 2 CPUs (this process may use $ncpu)" >&2; exit 2; }
  [ -n "${RSC_BENCH_NCPU:-}" ] || RSC_BENCH_NCPU=$ncpu exec taskset -c "1-$((ncpu - 1))" bash "$script" "$@"
  pin=(taskset -c 0)
  pin_note="pods on CPU 0 and the rest on 1-$((ncpu - 1))"
}
pods_cpu_ticks() {  # utime + stime of every pod in podpids, in clock ticks (getconf CLK_TCK a second)
  local t=0 p
  for p in "${podpids[@]}"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$t"
}
redis_stat() {  # redis_stat PORT FIELD: one field of that redis-server's INFO stats
  redis-cli -p "$1" info stats | tr -d '\r' | awk -F: -v k="$2" '$1 == k {print $2}'
}
free_port() {  # a loopback port nothing answers on, below the ephemeral range (32768+), and not one
  # this script was given before: a process started on one may not listen yet when the next is asked
  # for (two pods once drew the same port that way). Called in $(...): the ports go to a file.
  local p given="${dir:-/nonexistent}/.ports"
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 12000))
    if [ -f "$given" ] && grep -qx "$p" "$given"; then continue; fi
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    [ -d "${dir:-}" ] && echo "$p" >>"$given"
    echo "$p"
    return
  done
}
start_redis() {  # sets rport; not persisted; waits until it answers
  rport=$(free_port)
  redis_up "$rport" --save "" --appendonly no
}
redis_up() {  # redis_up PORT [redis-server args...]: starts one in $dir on PORT, sets rpid, waits until it answers
  redis-server --port "$1" --bind 127.0.0.1 --dir "$dir" --daemonize no --logfile "$dir/redis.log" "${@:2}" &
  rpid=$!
  pids+=("$rpid")
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "redis-server did not start; see $dir/redis.log" >&2
  return 1
}
wait_pods_serving() {  # wait_pods_serving N: until N pods serve their share of the groups (a new pod waits a pod lease; 10 s at most)
  local n
  [ "$1" -le 1 ] && return
  for _ in $(seq 1 100); do
    n=$( (grep -l "serves the groups it owns" "$dir"/pod*.log 2>/dev/null || true) | wc -l)
    [ "$n" -ge "$1" ] && return
    sleep 0.1
  done
}
wait_pods_ready() {  # wait_pods_ready N: until N coordinators logged "ready" in $dir/pod*.log (5 s at most)
  local n
  for _ in $(seq 1 50); do
    n=$( (grep -l "ready: serving" "$dir"/pod*.log 2>/dev/null || true) | wc -l)
    [ "$n" -ge "$1" ] && return
    sleep 0.1
  done
}
make_pod_tls() {  # a self-signed certificate for 127.0.0.1 in $dir; sets pod_tls_args (serve HTTPS, forward to the other pods over it) and tls_ca
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=rsc-local -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
  pod_tls_args=(--tls-cert-file "$dir/tls.crt" --tls-key-file "$dir/tls.key" --tls-peer-ca-file "$dir/tls.crt")
  tls_ca="$dir/tls.crt"
}
