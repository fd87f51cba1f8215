#!/bin/sh
# The image's HEALTHCHECK: GET /healthz on this container, however it serves. With a plain probe
# port (RSC_PROBE_LISTEN) there; else over HTTPS when it serves HTTPS (RSC_TLS_CERT_FILE), presenting
# its own certificate when it asks clients for one (RSC_TLS_CLIENT_CA_FILE: the pods present that
# certificate to each other too); else over HTTP. The port is the one the entrypoint listens on
# (RSC_HEALTHCHECK_PORT, default 8080). Exit 0 when it answers 200 within 2 s.
port=${RSC_HEALTHCHECK_PORT:-8080}
if [ -n "${RSC_PROBE_LISTEN:-}" ]; then
  exec curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:${RSC_PROBE_LISTEN##*:}/healthz"
fi
if [ -z "${RSC_TLS_CERT_FILE:-}" ]; then
  exec curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/healthz"
fi
# Its own address over loopback, which its certificate need not name: the check is that it
# answers, not who it is.
if [ -n "${RSC_TLS_CLIENT_CA_FILE:-}" ]; then
  exec curl -sfk -o /dev/null --max-time 2 --cert "$RSC_TLS_CERT_FILE" --key "$RSC_TLS_KEY_FILE" "https://127.0.0.1:$port/healthz"
fi
exec curl -sfk -o /dev/null --max-time 2 "https://127.0.0.1:$port/healthz"
