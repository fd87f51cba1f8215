#!/usr/bin/env bash
# rsc as an installable package: installs a build into a temp prefix (cmake --install),
# builds examples/consumer, a project outside the source tree, against it twice (find_package(rsc
# CONFIG) and pkg-config), runs both against a coordinator from the installed binaries and a
# private redis-server (free loopback ports, stopped by pid), and builds the .deb with cpack and
# lists what it holds. Run by ctest (Install.OutOfTreeExampleBuildsAndConsumes).
#   bash scripts/check-install.sh [BUILD_DIR]
set -uo pipefail  # no -e: every check runs and says ok or FAIL
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
. scripts/lib/local.sh
local_init install
prefix="$dir/prefix"
fail=0
check() { if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi; }

cmake --install "$build" --prefix "$prefix" >"$dir/install.log" || { echo "FAIL cmake --install"; exit 1; }
for f in bin/rsc-coordinator bin/rsc-consume bin/rsc-produce bin/rsc-admin lib/librsc_member.a lib/librsc_producer.a \
         include/rsc/member/runtime.hpp include/rsc/member/producer.hpp lib/cmake/rsc/rscConfig.cmake lib/pkgconfig/rsc.pc; do
  test -e "$prefix/$f"; check $? "installed $f"
done
# The public headers name no internal store type: no connection, client, store or hiredis.
bad=$(grep -l -E 'redis/connection.hpp|redis/client.hpp|redis/store.hpp|hiredis|GroupStore|RedisConnection' \
      -r "$prefix/include/rsc" || true)
test -z "$bad"; check $? "the public headers include nothing internal${bad:+ (found in $bad)}"

cmake -S examples/consumer -B "$dir/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >"$dir/example-cmake.log" 2>&1 &&
  cmake --build "$dir/cmake-build" -j2 >>"$dir/example-cmake.log" 2>&1
check $? "examples/consumer builds with find_package(rsc CONFIG) (rsc::member, rsc::producer)"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" c++ -O1 examples/consumer/main.cpp $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs rsc) \
  -o "$dir/example-pkgconfig" >"$dir/example-pc.log" 2>&1
check $? "examples/consumer builds with pkg-config rsc"
# pkg-config imposes no language standard, and a C++20 application builds against the headers, with
# pkg-config and with find_package.
! PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags rsc | grep -q -- '-std='
check $? "pkg-config's Cflags force no -std ($(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags rsc))"
# The headers are <rsc/...> and include each other by relative paths: an application whose own
# include path has member/, redis/ and protocol/ headers of the same names builds unchanged (issue
# 55; with -I<prefix>/include/rsc and "protocol/types.hpp" inside rsc's headers it did not).
clash="$dir/app-headers"
for h in protocol/types.hpp redis/result.hpp redis/redis_options.hpp member/record.hpp member/runtime.hpp member/http_client.hpp; do
  mkdir -p "$clash/$(dirname "$h")"
  echo "#error \"the application's own $h was taken for rsc's\"" >"$clash/$h"
done
! grep -rn '#include "\(member\|redis\|protocol\)/' "$prefix/include/rsc" >/dev/null
check $? "the installed headers include each other by relative paths"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" c++ -std=c++17 -fsyntax-only -I"$clash" examples/consumer/main.cpp \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags rsc) >"$dir/example-clash.log" 2>&1
check $? "an application with its own protocol/, redis/ and member/ headers on its include path builds against <rsc/...>"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" c++ -std=c++20 -fsyntax-only examples/consumer/main.cpp \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags rsc) >"$dir/example-cxx20.log" 2>&1
check $? "examples/consumer compiles as C++20 with pkg-config rsc"
cmake -S examples/consumer -B "$dir/cmake-build-20" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_STANDARD=20 \
  >"$dir/example-cmake-20.log" 2>&1 &&
  grep -q -- '-std=gnu++20\|-std=c++20' <(cmake --build "$dir/cmake-build-20" -j2 -- VERBOSE=1 2>&1 | tee -a "$dir/example-cmake-20.log")
check $? "examples/consumer builds as C++20 with find_package(rsc CONFIG)"

start_redis
cport=$(free_port)
"$prefix/bin/rsc-coordinator" --listen "127.0.0.1:$cport" --redis "127.0.0.1:$rport" --heartbeat-interval-ms 200 \
  --tick-interval-ms 100 2>"$dir/pod1.log" &
pids+=($!)
wait_pods_ready 1
curl -fsS -X PUT "http://127.0.0.1:$cport/coord/v1/streams/orders" -H 'Content-Type: application/json' \
  -d '{"shardCount": 4}' >/dev/null
for b in cmake-build/example-consumer example-pkgconfig; do
  out=$(timeout 60 "$dir/$b" "http://127.0.0.1:$cport" 127.0.0.1 "$rport" orders "g-${b%%/*}" 20 2>&1)
  rc=$?
  echo "  $out" | tail -2
  [ "$rc" = 0 ] && grep -q "produced 20 and consumed 20" <<<"$out"
  check $? "$b produced 20 records and consumed them through the coordinator"
done

# The packages: rsc-coordinator, rsc-tools and librsc-dev, binaries stripped, a server
# and tools that depend on no development package, the unit, the configuration as a conffile, the
# service user made by postinst, a copyright file in each; their sizes; lintian where installed.
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  mkdir -p "$dir/debs"
  (cd "$dir/debs" && cpack -G DEB --config "$build/CPackConfig.cmake" >"$dir/cpack.log" 2>&1)
  check $? "cpack builds the packages"
  for p in rsc-coordinator rsc-tools librsc-dev; do
    deb=$(ls "$dir"/debs/${p}_*.deb 2>/dev/null | head -1)
    test -n "$deb"; check $? "there is a $p package"
    [ -n "$deb" ] || continue
    contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
    depends=$(dpkg-deb -f "$deb" Depends)
    size=$(du -k "$deb" | cut -f1) installed=$(dpkg-deb -f "$deb" Installed-Size)
    echo "  $p: ${size} KiB, ${installed} KiB installed; Depends: $depends"
    grep -q "usr/share/doc/$p/copyright" <<<"$contents"; check $? "$p has its copyright file"
    case $p in
      rsc-coordinator) want="usr/bin/rsc-coordinator ./lib/systemd/system/rsc-coordinator.service ./etc/rsc/coordinator.json"
                       unwanted="rsc-proxy rsc-consume \\.a$ include/" ;;
      rsc-tools) want="usr/bin/rsc-consume usr/bin/rsc-produce usr/bin/rsc-admin"
                 unwanted="rsc-coordinator$ rsc-proxy \\.a$ include/" ;;
      librsc-dev) want="usr/lib/librsc_member.a usr/lib/cmake/rsc/rscConfig.cmake usr/lib/pkgconfig/rsc.pc usr/include/rsc/member/runtime.hpp usr/include/rsc/protocol/types.hpp"
                  unwanted="usr/bin/" ;;
    esac
    for f in $want; do grep -q "$f" <<<"$contents"; check $? "$p holds $f"; done
    for f in $unwanted; do ! grep -q "$f" <<<"$contents"; check $? "$p holds no $f"; done
    if [ "$p" != librsc-dev ]; then
      ! grep -q -- '-dev\b' <<<"$depends"
      check $? "$p depends on no development package"
      x="$dir/x-$p"
      dpkg-deb -x "$deb" "$x"
      for b in "$x"/usr/bin/*; do
        ! readelf -S "$b" | grep -q '\.symtab'
        check $? "$(basename "$b") is stripped ($(du -k "$b" | cut -f1) KiB)"
      done
    fi
  done
  # The example against the librsc-dev package itself (stripped libraries, relocatable .pc), as C++20.
  deb="$(ls "$dir"/debs/librsc-dev_*.deb 2>/dev/null | head -1)"
  if [ -n "$deb" ]; then
    dpkg-deb -x "$deb" "$dir/x-dev"
    pc="$dir/x-dev/usr/lib/pkgconfig"
    c++ -std=c++20 -O1 examples/consumer/main.cpp $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs rsc) \
      -o "$dir/example-from-deb" >"$dir/example-deb.log" 2>&1
    check $? "examples/consumer builds and links as C++20 against the librsc-dev package ($(du -sk "$dir/x-dev" | cut -f1) KiB unpacked)"
  fi
  deb="$(ls "$dir"/debs/rsc-coordinator_*.deb 2>/dev/null | head -1)"
  if [ -n "$deb" ]; then
    ctl="$dir/ctl"
    dpkg-deb -e "$deb" "$ctl"
    grep -qx /etc/rsc/coordinator.json "$ctl/conffiles"; check $? "/etc/rsc/coordinator.json is a conffile"
    grep -q "adduser --system" "$ctl/postinst" && grep -q "deb-systemd-helper enable" "$ctl/postinst"
    check $? "postinst makes the system user and enables and starts the unit"
    x="$dir/x-rsc-coordinator"
    "$x/usr/bin/rsc-coordinator" --check-config --config "$x/etc/rsc/coordinator.json" >"$dir/packaged-config.log" 2>&1
    check $? "the packaged configuration is valid ($(cut -c1-80 "$dir/packaged-config.log"))"
    # systemd reads the unit as it would install it: the binary and kill where the unit names them.
    if command -v systemd-analyze >/dev/null; then
      unit="$dir/unit-check/rsc-coordinator.service"
      mkdir -p "$dir/unit-check"
      sed "s#/usr/bin/rsc-coordinator#$x/usr/bin/rsc-coordinator#g; s#/etc/rsc/#$x/etc/rsc/#g" \
        "$x/lib/systemd/system/rsc-coordinator.service" >"$unit"
      out=$(systemd-analyze verify "$unit" 2>&1)
      ! grep -v -e 'Failed to .*bus' -e 'rsc-coordinator.service: Command .* is not executable' <<<"$out" | grep -q .
      check $? "systemd-analyze verify finds nothing wrong in the unit${out:+ ($(head -c 200 <<<"$out"))}"
    fi
    if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v nsenter >/dev/null && [ -x /lib/systemd/systemd ]; then
      bash scripts/check-deb-systemd.sh "$dir/debs" | sed 's/^/  /'
      check "${PIPESTATUS[0]}" "rsc-coordinator installs and runs under systemd (scripts/check-deb-systemd.sh)"
    else
      echo "  (not root, or no unshare/nsenter/systemd: the package is not booted under systemd here)"
    fi
  fi
  # lintian (installed by install-deps.sh): no error and no warning; the one tag overridden is
  # explained in packaging/lintian/librsc-dev.
  if command -v lintian >/dev/null; then
    lintian --tag-display-limit 0 --show-overrides "$dir"/debs/*.deb 2>&1 | grep -v 'root privileges' >"$dir/lintian.log"
    sed 's/^/    /' "$dir/lintian.log" | head -40
    ! grep -q '^[EW]: ' "$dir/lintian.log"
    check $? "lintian: $(grep -c '^E: ' "$dir/lintian.log") errors, $(grep -c '^W: ' "$dir/lintian.log") warnings, $(grep -c '^O: ' "$dir/lintian.log") overridden (explained)"
  else
    echo "FAIL lintian is not installed (bash scripts/install-deps.sh installs it)"
    fail=1
  fi
fi
[ "$fail" = 0 ] || { KEEP_DIR=1; echo "check-install: failures; logs in $dir"; }
exit "$fail"
