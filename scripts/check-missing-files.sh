#!/usr/bin/env bash
# Every tool given a TLS file or a token file that cannot be read exits 2 at once, naming the file
# (as the coordinator does), instead of retrying connections that cannot work: a consumer that
# joined with an unreadable Redis CA would hold shards it can never read. Nothing is started; each
# call is bounded by 10 s.
#   bash scripts/check-missing-files.sh BUILD_DIR
set -uo pipefail
build=${1:?build dir}
fails=0
expect_exit_2() {  # expect_exit_2 WHAT PATH-IT-MUST-NAME COMMAND...
  local what=$1 path=$2
  shift 2
  local err rc
  err=$(timeout 10 "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL: $what: exit $rc (want 2 at once)${err:+: $(echo "$err" | head -1)}"
    fails=$((fails + 1))
  elif ! grep -qF -- "$path" <<<"$err"; then
    echo "FAIL: $what: exit 2 but the message does not name $path: $(echo "$err" | head -1)"
    fails=$((fails + 1))
  else
    echo "ok: $what: $(echo "$err" | head -1)"
  fi
}
nowhere=/nonexistent-rsc-check
consume=("$build/rsc-consume" --coordinator http://127.0.0.1:9 --redis 127.0.0.1:9 --stream s --group g)
produce=("$build/rsc-produce" --coordinator http://127.0.0.1:9 --redis 127.0.0.1:9 --stream s --count 1)
admin=("$build/rsc-admin" --coordinator http://127.0.0.1:9)
for tool in consume produce; do
  declare -n cmd=$tool
  expect_exit_2 "rsc-$tool --redis-tls-ca-file" "$nowhere/ca.pem" "${cmd[@]}" --redis-tls-ca-file "$nowhere/ca.pem"
  expect_exit_2 "rsc-$tool --redis-tls-cert-file" "$nowhere/c.pem" "${cmd[@]}" --redis-tls-cert-file "$nowhere/c.pem" \
    --redis-tls-key-file "$nowhere/k.pem"
  expect_exit_2 "rsc-$tool --redis-password-file" "$nowhere/pw" "${cmd[@]}" --redis-password-file "$nowhere/pw"
  expect_exit_2 "rsc-$tool --coordinator-ca-file" "$nowhere/ca.pem" "${cmd[@]}" --coordinator-ca-file "$nowhere/ca.pem"
  expect_exit_2 "rsc-$tool --coordinator-cert-file" "$nowhere/c.pem" "${cmd[@]}" --coordinator-cert-file "$nowhere/c.pem" \
    --coordinator-key-file "$nowhere/k.pem"
  unset -n cmd
done
for tool in consume produce admin; do
  declare -n cmd=$tool
  expect_exit_2 "rsc-$tool --token-file" "$nowhere/token" "${cmd[@]}" --token-file "$nowhere/token" list-streams
  expect_exit_2 "rsc-$tool RSC_TOKEN_FILE" "$nowhere/token" env RSC_TOKEN_FILE="$nowhere/token" "${cmd[@]}" list-streams
  unset -n cmd
done
expect_exit_2 "rsc-admin --coordinator-ca-file" "$nowhere/ca.pem" "${admin[@]}" --coordinator-ca-file "$nowhere/ca.pem" list-streams
expect_exit_2 "rsc-admin --coordinator-key-file" "$nowhere/k.pem" "${admin[@]}" --coordinator-cert-file "$0" \
  --coordinator-key-file "$nowhere/k.pem" list-streams
if [ "$fails" -gt 0 ]; then
  echo "check-missing-files: $fails failed"
  exit 1
fi
echo "check-missing-files: PASS"
