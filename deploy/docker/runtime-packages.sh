#!/bin/sh
# The Debian packages that hold the shared libraries the given binaries load (ldd, then dpkg -S),
# one per line: what the runtime image installs, and nothing it does not need.
#   sh deploy/docker/runtime-packages.sh BINARY...
set -eu
for b in "$@"; do
  [ -x "$b" ] || { echo "runtime-packages: $b is not an executable" >&2; exit 1; }
done
libs=$(for b in "$@"; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u)
found=""
for f in $libs; do
  # Merged /usr: a library found under /lib may be recorded under /usr/lib, or the other way round.
  p=$(dpkg -S "$f" 2>/dev/null || dpkg -S "$(realpath "$f")" 2>/dev/null || dpkg -S "/usr$f" 2>/dev/null ||
      dpkg -S "${f#/usr}" 2>/dev/null) || { echo "runtime-packages: no package holds $f" >&2; exit 1; }
  found="$found ${p%%:*}"
done
printf '%s\n' $found | sort -u
