#!/usr/bin/env bash
# One command: build, then run the whole test suite (unit, plugin, privileged, e2e, hostile).
# Privileged suites need root; they skip with a reason otherwise, and fail instead of skipping
# when AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 (CI sets it). Pass ctest arguments through, e.g.
#   scripts/test.sh -L unit        only the tests that need no root
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# Sandbox tests are CPU-heavy and some measure limits: two at a time on this 2-core class.
exec ctest --test-dir build --output-on-failure -j 2 "$@"
