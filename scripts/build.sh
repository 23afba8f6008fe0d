#!/usr/bin/env bash
# Configures (once) and builds airlock into build/. Extra arguments go to cmake at configure time.
#
#   scripts/build.sh             everything: airlock, its agent and plugins, the tests, benchmarks
#   scripts/build.sh --runtime   only what `airlock run` needs (the airlock_minimal target: the
#                                binary, agent, namespaces backend and language plugins; no
#                                tests), for scripts/setup.sh; a later plain build adds the rest
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=0
if [ "${1:-}" = --runtime ]; then
  runtime=1
  shift
fi
if [ ! -f build/build.ninja ]; then
  # A runtime tree is configured without the tests, so it needs neither GoogleTest nor the time
  # to compile the suite.
  tests=ON
  [ "$runtime" -eq 1 ] && tests=OFF
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_BUILD_TESTS="$tests" "$@"
elif [ "$runtime" -eq 0 ] && grep -q '^AIRLOCK_BUILD_TESTS:BOOL=OFF' build/CMakeCache.txt; then
  # The tree scripts/setup.sh made: add the tests. What is built already stays built.
  cmake -S . -B build -DAIRLOCK_BUILD_TESTS=ON "$@"
fi
if [ "$runtime" -eq 1 ]; then
  cmake --build build -j "$(nproc)" --target airlock_minimal
else
  cmake --build build -j "$(nproc)"
fi
