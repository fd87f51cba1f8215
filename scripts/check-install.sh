#!/usr/bin/env bash
# rsc as an installable package (issue 30): installs a build into a temp prefix (cmake --install),
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
# pkg-config and with find_package (issue 55).
! PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags rsc | grep -q -- '-std='
check $? "pkg-config's Cflags force no -std ($(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags rsc))"
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

if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  (cd "$dir" && cpack -G DEB --config "$build/CPackConfig.cmake" >"$dir/cpack.log" 2>&1)
  check $? "cpack builds a .deb"
  deb=$(ls "$dir"/rsc_*.deb 2>/dev/null | head -1)
  if [ -n "$deb" ]; then
    contents=$(dpkg-deb -c "$deb")
    for f in bin/rsc-coordinator lib/librsc_member.a lib/cmake/rsc/rscConfig.cmake include/rsc/member/producer.hpp; do
      grep -q "$f" <<<"$contents"; check $? "the .deb holds $f"
    done
    echo "  $(dpkg-deb -f "$deb" Package Version Depends | tr '\n' ' ')"
  fi
fi
[ "$fail" = 0 ] || { KEEP_DIR=1; echo "check-install: failures; logs in $dir"; }
exit "$fail"
