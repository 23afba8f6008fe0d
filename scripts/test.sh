#!/usr/bin/env bash
# One command: build, then run the whole test suite (unit, plugin, privileged, e2e, hostile).
# Privileged suites need root; they skip with a reason otherwise, and fail instead of skipping
# when AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 (CI sets it). Pass ctest arguments through, e.g.
#   scripts/test.sh -L unit        only the tests that need no root
#
# The conformance suite (privileged, e2e and hostile tests that describe a sandbox) runs once
# per isolation backend: AIRLOCK_TEST_BACKENDS=namespaces,gvisor,microvm picks them; unset, namespaces
# and every other backend `airlock doctor` says works here. Cases a backend cannot support are
# listed in tests/conformance/<backend>-gaps.txt, printed at the end, and shown as Disabled.
set -euo pipefail
cd "$(dirname "$0")/.."
# After scripts/setup.sh, the tests' own packages (GoogleTest, the SDKs' clients, the optional
# backends) are still missing: install-deps adds them (it skips what is present, and needs root).
if [ "$(id -u)" -eq 0 ]; then
  bash scripts/install-deps.sh
fi
bash scripts/build.sh

backends="${AIRLOCK_TEST_BACKENDS:-}"
if [ -z "$backends" ]; then
  backends=namespaces
  if [ "$(id -u)" -eq 0 ]; then
    doctor="$(build/bin/airlock doctor 2>/dev/null || true)"
    for b in gvisor microvm; do
      grep -Eq "^backend $b +ok" <<<"$doctor" && backends+=",$b"
    done
  fi
fi
exclude=()
for b in gvisor microvm; do
  case ",$backends," in
    *",$b,"*) ;;
    *) exclude+=("^$b-") ;;
  esac
done
label_args=()
if [ "${#exclude[@]}" -gt 0 ]; then
  label_args=(-LE "$(IFS='|'; echo "${exclude[*]}")")
fi
echo "test.sh: isolation backends under test: $backends"
# microVMs boot what `airlock image prepare` prepares (the /usr image takes a minute or two the
# first time); build it now rather than inside the first test's time limit.
case ",$backends," in *",microvm,"*) build/bin/airlock image prepare ;; esac

# Sandbox tests are CPU-heavy and some measure limits: two at a time on this 2-core class.
rc=0
ctest --test-dir build --output-on-failure -j 2 "${label_args[@]}" "$@" || rc=$?
for b in gvisor microvm; do
  case ",$backends," in *",$b,"*)
    echo "test.sh: conformance cases the $b backend cannot support (tests/conformance/$b-gaps.txt):"
    grep -v '^#' "tests/conformance/$b-gaps.txt" | sed 's/^/  /' ;;
  esac
done
# The runs pinned the audit engine (docs/audit.md), whose programs keep the sandboxes' cgroup
# parent in place: unpin it, as an operator would, so the host is left as it was. A version a
# running airlock process uses stays (exit status 1), which is not the tests' failure.
if [ "$(id -u)" -eq 0 ] && [ -x build/bin/airlock ]; then
  build/bin/airlock audit unload >/dev/null || true
fi
exit "$rc"
