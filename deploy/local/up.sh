#!/usr/bin/env bash
# A local rsc stack: a private redis-server, three coordinator pods and Debian's prometheus scraping
# them with the project's alert rules, all on free loopback ports, in the background. What it
# started is written to $RSC_LOCAL_DIR (default /tmp/rsc-local): pids, ports (stack.env) and logs;
# deploy/local/down.sh stops exactly those processes. Needs a build (bash scripts/build.sh).
#   bash deploy/local/up.sh          SCRAPE_INTERVAL=1s and RSC_COORDINATOR_BIN may be set
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
state=${RSC_LOCAL_DIR:-/tmp/rsc-local}
bin=${RSC_COORDINATOR_BIN:-$root/build/rsc-coordinator}
[ -x "$bin" ] || { echo "up.sh: no $bin; build first (bash scripts/build.sh)" >&2; exit 1; }
if [ -s "$state/pids" ]; then
  echo "up.sh: a stack is recorded in $state already; stop it with deploy/local/down.sh" >&2
  exit 1
fi
mkdir -p "$state/prometheus-data"
: >"$state/pids"
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
started() { echo "$1 $2" >>"$state/pids"; }  # pid, what

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --dir "$state" --save "" --appendonly no --daemonize no \
  --logfile "$state/redis.log" &
started $! redis-server
for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done

targets=""
pods=""
for i in 1 2 3; do
  port=$(free_port)
  "$bin" --listen "127.0.0.1:$port" --redis "127.0.0.1:$rport" 2>"$state/pod$i.log" &
  started $! "rsc-coordinator pod$i"
  targets="${targets:+$targets, }\"127.0.0.1:$port\""
  pods="${pods:+$pods }$port"
done

pport=$(free_port)
cat >"$state/prometheus.yml" <<YAML
global:
  scrape_interval: ${SCRAPE_INTERVAL:-5s}
  evaluation_interval: ${SCRAPE_INTERVAL:-5s}
rule_files:
  - $root/deploy/prometheus/rsc-alerts.yml
scrape_configs:
  - job_name: rsc
    metrics_path: /metrics
    static_configs:
      - targets: [$targets]
YAML
prometheus --config.file="$state/prometheus.yml" --storage.tsdb.path="$state/prometheus-data" \
  --web.listen-address="127.0.0.1:$pport" >"$state/prometheus.log" 2>&1 &
started $! prometheus
cat >"$state/stack.env" <<ENV
REDIS_PORT=$rport
POD_PORTS="$pods"
PROMETHEUS_PORT=$pport
ENV
for _ in $(seq 1 100); do curl -sf "127.0.0.1:$pport/-/ready" >/dev/null 2>&1 && break; sleep 0.1; done
echo "up.sh: redis 127.0.0.1:$rport; pods on ports $pods; prometheus http://127.0.0.1:$pport"
echo "up.sh: state, logs and pids in $state; stop with: bash deploy/local/down.sh"
