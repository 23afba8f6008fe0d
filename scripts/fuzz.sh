#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan) into build-fuzz/ and runs them.
# docs/security-tests.md ("Fuzzing") says what each target feeds.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: scripts/fuzz.sh [--merge] [TARGET|all] [SECONDS]

Runs one fuzz target (or all of them, one per CPU at a time) for SECONDS each (default 60) on a
copy of its seed corpus fuzz/corpus/TARGET, with its dictionary fuzz/dict/TARGET.dict when there
is one. Configures and builds build-fuzz/ first (CC=clang CXX=clang++, -DAIRLOCK_FUZZ=ON).

Prints, per target: executions, executions per second, coverage (cov: and ft: of libFuzzer's
final line) and crashes. A crash, sanitizer report, leak or timeout stops that target; its input
is kept under build-fuzz/artifacts/TARGET/ and the script exits 1 after the other targets ran.

  --merge   add the new inputs that reach new coverage to fuzz/corpus/TARGET, minimised
            (libFuzzer -merge=1); without it the committed corpus is never changed
  --help    this text

Targets: the fuzz/*_fuzz.cc files, without _fuzz.cc.
EOF
}

merge=0
args=()
for a in "$@"; do
  case "$a" in
    --help | -h) usage; exit 0 ;;
    --merge) merge=1 ;;
    -*) echo "fuzz.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) args+=("$a") ;;
  esac
done
target="${args[0]:-all}"
seconds="${args[1]:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "fuzz.sh: SECONDS must be a positive whole number, not '$seconds'" >&2
  exit 2
fi

all_targets=()
for f in fuzz/*_fuzz.cc; do
  name="$(basename "$f" _fuzz.cc)"
  all_targets+=("$name")
done
if [ "$target" = all ]; then
  targets=("${all_targets[@]}")
elif [ -f "fuzz/${target}_fuzz.cc" ]; then
  targets=("$target")
else
  echo "fuzz.sh: no target '$target'; targets: ${all_targets[*]}" >&2
  exit 2
fi

# The longest input each target gets: room for a few frames, a request over the 16 KiB header
# limit, a policy file, and so on; longer inputs only slow the search down.
max_len() {
  case "$1" in
    net_rule) echo 1024 ;;
    shell_scan) echo 4096 ;;
    api_http) echo 20000 ;;
    protocol_codec | policy) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DAIRLOCK_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target fuzz_all -j "$(nproc)"

work="$(mktemp -d /tmp/airlock-fuzz.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/logs"
# One target: fuzz a copy of its corpus, then write its summary line (and FAILED when it
# crashed) under $work, so targets can run side by side.
fuzz_one() {
  local t="$1" corpus="$work/$t" log="$build/logs/$1.log" rc=0
  mkdir -p "$corpus" "$build/artifacts/$t"
  [ -d "fuzz/corpus/$t" ] && cp -r "fuzz/corpus/$t/." "$corpus/"
  local dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=("-dict=fuzz/dict/$t.dict")
  echo "== $t: ${seconds}s, max_len $(max_len "$t")"
  "$build/fuzz/${t}_fuzz" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
    -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" >"$log" 2>&1 || rc=$?
  local execs rate last cov ft crash
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  last="$(grep -E '^#[0-9]+' "$log" | tail -1 || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
  crash="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | head -1)"
  if [ "$rc" -ne 0 ] || [ -n "$crash" ]; then
    touch "$work/$t.failed"
    grep -E 'ERROR: |SUMMARY: |runtime error|invariant failed' "$log" | head -5 || true
    echo "   $t: CRASH (exit $rc): input ${crash:-not saved}; log $log"
    printf '%-16s %10s %8s %6s %7s  crash: %s\n' "$t" "${execs:-?}" "${rate:-?}" \
      "${cov:-?}" "${ft:-?}" "${crash:-see $log}" >"$work/$t.summary"
  else
    printf '%-16s %10s %8s %6s %7s  crashes: 0\n' "$t" "${execs:-?}" "${rate:-?}" \
      "${cov:-?}" "${ft:-?}" >"$work/$t.summary"
  fi
  if [ "$merge" = 1 ]; then
    "$build/fuzz/${t}_fuzz" -merge=1 -max_len="$(max_len "$t")" "fuzz/corpus/$t" "$corpus" \
      >>"$log" 2>&1
    echo "   merged: fuzz/corpus/$t has $(ls "fuzz/corpus/$t" | wc -l) inputs"
  fi
}

# One target per CPU at a time: each fuzzer is single-threaded, and CI's time is counted.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
  if [ -f "$work/$t.failed" ]; then failed=1; fi
done

echo
printf '%-16s %10s %8s %6s %7s\n' target executions exec/s cov ft
for t in "${targets[@]}"; do cat "$work/$t.summary"; done
exit "$failed"
