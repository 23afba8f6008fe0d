#!/usr/bin/env bash
# The sanitizer legs of CI: the unit suites a small tree can afford (tests/sanitize/: policy,
# agent protocol, the namespaces lookups, and the API server with its threads, limits, load and
# abuse cases) under ASan + UBSan, and the API server's tests under TSan.
#
# Both trees are small on purpose: a whole sanitized build does not fit CI's time. ASan + UBSan
# reuse the fuzz tree (build-fuzz/, clang), whose libraries are already built that way for the
# fuzzers; TSan gets a sanitizer tree of its own (build-tsan/). Any report fails the run. Tests
# print their timing and memory figures under a sanitizer but assert on them only in a plain
# build (kSanitizedBuild in tests/support/test_support.h).
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(policy_tests protocol_tests namespaces_unit_tests api_sanitized_tests)

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DAIRLOCK_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build-fuzz --target "${tests[@]}" -j "$(nproc)"
echo "sanitize.sh: ASan + UBSan: ${tests[*]}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-fuzz --output-on-failure -j "$(nproc)"

if [ ! -f build-tsan/build.ninja ]; then
  cmake -S . -B build-tsan -G Ninja -DAIRLOCK_SANITIZER_TREE=ON -DAIRLOCK_SANITIZE=thread \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build-tsan --target api_sanitized_tests -j "$(nproc)"
echo "sanitize.sh: TSan: api_sanitized_tests"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/tests/api_sanitized_tests
