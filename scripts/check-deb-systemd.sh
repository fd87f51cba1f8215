#!/usr/bin/env bash
# The rsc-coordinator package under systemd: boots systemd as PID 1 of a PID namespace of
# its own, in a throwaway copy of this machine's root (an overlay whose writes go to a tmpfs, in a
# private mount namespace; it shares the network and nothing else), installs the package there with
# dpkg and checks what an administrator would: the service is enabled and running, as the system
# user rsc, from the packaged unit and /etc/rsc/coordinator.json (pointed at a private redis-server
# by /etc/default/rsc-coordinator), /readyz answers, `systemctl reload` keeps the same process,
# `dpkg -r` stops it and keeps the configuration, `dpkg --purge` removes it. Needs root (mount,
# unshare, chroot); nothing on this machine itself changes, and systemd and all it started end when
# the test does (SIGKILL to that PID 1 ends its namespace).
#   bash scripts/check-deb-systemd.sh DIR_WITH_THE_DEBS
set -uo pipefail
cd "$(dirname "$0")/.."
debdir=$(cd "${1:?a directory holding rsc-coordinator_*.deb}" && pwd)
deb=$(ls "$debdir"/rsc-coordinator_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "check-deb-systemd: no rsc-coordinator_*.deb in $debdir" >&2; exit 2; }
. scripts/lib/local.sh
local_init systemd
fail=0
check() { if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi; }
spid=""
stop_systemd() { [ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null; [ -n "${upid:-}" ] && wait "$upid" 2>/dev/null; }
trap 'stop_systemd; local_cleanup' EXIT

# What the package would put on this machine, were it installed here: it must not be, after.
host_state() {
  local f
  for f in /usr/bin/rsc-coordinator /lib/systemd/system/rsc-coordinator.service /etc/rsc/coordinator.json; do
    test -e "$f" && echo "$f:present" || echo "$f:absent"
  done | tr '\n' ' '
}
before=$(host_state)
start_redis
cport=$(free_port)
mkdir -p "$dir/ns" "$dir/root"
cp "$deb" "$dir/"
cat >"$dir/boot.sh" <<EOF
set -e
mount --make-rprivate /
mount -t tmpfs tmpfs "$dir/ns"
mkdir -p "$dir/ns/upper" "$dir/ns/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$dir/ns/upper,workdir=$dir/ns/work" "$dir/root"
mount -t proc proc "$dir/root/proc"
mount --rbind /sys "$dir/root/sys"
mount --rbind /dev "$dir/root/dev"
mount -t tmpfs tmpfs "$dir/root/run"
mount -t tmpfs tmpfs "$dir/root/tmp"
mkdir -p "$dir/root/root/debs"
cp "$deb" "$dir/root/root/debs/"
# basic.target: the services this machine has enabled (a redis-server, say) stay off.
exec chroot "$dir/root" env container=rsc-check /lib/systemd/systemd --system --unit=basic.target
EOF
unshare --mount --pid --fork bash "$dir/boot.sh" >"$dir/systemd.log" 2>&1 &
upid=$!
for _ in $(seq 1 100); do
  spid=$(pgrep -P "$upid" -x systemd || true)
  [ -n "$spid" ] && break
  sleep 0.1
done
test -n "$spid"
check $? "systemd runs as PID 1 of its own namespace (pid $spid here)"
[ -n "$spid" ] || { tail -20 "$dir/systemd.log"; exit 1; }
inside() { nsenter --target "$spid" --mount --pid --root --wd -- "$@"; }
state=""
for _ in $(seq 1 60); do  # its bus comes up a moment after it starts
  state=$(timeout 60 nsenter --target "$spid" --mount --pid --root --wd -- systemctl is-system-running --wait 2>&1)
  [ "$state" = running ] || [ "$state" = degraded ] && break
  sleep 0.5
done
[ "$state" = running ] || [ "$state" = degraded ]
check $? "it booted ($state)"

inside sh -c "printf 'RSC_LISTEN=127.0.0.1:$cport\nRSC_REDIS=127.0.0.1:$rport\n' > /etc/default/rsc-coordinator"
# A container image's /usr/sbin/policy-rc.d forbids starting services on installation (Docker's
# images ship one answering 101); a machine has none, and neither has this copy.
inside rm -f /usr/sbin/policy-rc.d
inside dpkg -i "/root/debs/$(basename "$deb")" >"$dir/dpkg-i.log" 2>&1
check $? "dpkg -i $(basename "$deb")"
inside getent passwd rsc | grep -q ':/nonexistent:/usr/sbin/nologin$'
check $? "the system user rsc exists, with no home and no shell"
[ "$(inside systemctl is-enabled rsc-coordinator 2>&1)" = enabled ]
check $? "the service is enabled"
ready=0
for _ in $(seq 1 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cport/readyz")" = 200 ] && { ready=1; break; }
  sleep 0.1
done
check $((1 - ready)) "the service is active and /readyz answers 200 ($(inside systemctl is-active rsc-coordinator 2>&1))"
main=$(inside systemctl show -p MainPID --value rsc-coordinator)
user=$(inside ps -o user= -p "$main" 2>/dev/null | tr -d ' ')
[ "$user" = rsc ]
check $? "it runs as rsc (main pid $main in its namespace: $user)"
hardening=$(inside systemctl show -p NoNewPrivileges -p ProtectSystem -p PrivateTmp -p CapabilityBoundingSet rsc-coordinator | tr '\n' ' ')
grep -q "NoNewPrivileges=yes" <<<"$hardening" && grep -q "ProtectSystem=strict" <<<"$hardening" && grep -q "CapabilityBoundingSet=$" <<<"$(inside systemctl show -p CapabilityBoundingSet rsc-coordinator)"
check $? "with the unit's hardening in force ($hardening)"
mode=$(inside stat -c '%a %U:%G' /etc/rsc/coordinator.json)
[ "$mode" = "640 root:rsc" ]
check $? "/etc/rsc/coordinator.json is readable by the service only ($mode)"
inside systemctl reload rsc-coordinator
hup=1
for _ in $(seq 1 30); do
  inside journalctl -u rsc-coordinator --no-pager | grep -q "rsc-coordinator: SIGHUP" && { hup=0; break; }
  sleep 0.1
done
[ "$hup" = 0 ] && [ "$(inside systemctl show -p MainPID --value rsc-coordinator)" = "$main" ]
check $? "systemctl reload reaches the same process (SIGHUP in its journal)"
inside journalctl -u rsc-coordinator --no-pager -n 200 >"$dir/journal.log" 2>&1

inside dpkg -r rsc-coordinator >"$dir/dpkg-r.log" 2>&1
check $? "dpkg -r rsc-coordinator"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cport/healthz")
[ "$code" = 000 ] && [ "$(inside systemctl is-active rsc-coordinator 2>&1)" != active ] && inside test -f /etc/rsc/coordinator.json
check $? "removed: stopped (nothing answers) and its configuration kept"
inside dpkg --purge rsc-coordinator >>"$dir/dpkg-r.log" 2>&1 && ! inside test -e /etc/rsc/coordinator.json
check $? "purged: its configuration is gone"
[ "$(host_state)" = "$before" ]
check $? "and this machine itself is as it was ($before)"
if [ "$fail" != 0 ]; then
  KEEP_DIR=1
  tail -30 "$dir/journal.log" "$dir/dpkg-i.log" 2>/dev/null
fi
echo "check-deb-systemd: $([ "$fail" = 0 ] && echo passed || echo FAILED)"
exit "$fail"
