#!/usr/bin/env bash
# B7, gVisor (docs/performance.md, bench/README.md): `airlock run --isolation gvisor` of Python
# print(1) and of the pandas CSV example (examples/summarize_spending.py), cold (a new sandbox per
# run), against bare `runsc do` of the same program, timed in interleaved rounds (shuffled order
# each round) in the same run. Prints medians and the ratio airlock / runsc (target <= 1.1).
# The warm rows (create from the warm pool, a session round trip) are service_bench.py's B2 and
# B3 with --isolation gvisor.
#
# Usage: bench/b7_gvisor.sh [--smoke] [--runs N] [--airlock PATH] [--runsc PATH]
#   --smoke   3 runs of print(1) only (CI keeps the script working with this; < 30 s)
# Needs root and runsc. `runsc do` gets --ignore-cgroups and a throwaway --root, so it leaves no
# cgroups or state behind; both sides use the ptrace platform and no network.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
runsc=/usr/bin/runsc
runs=20
smoke=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=true; runs=3; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --airlock) airlock="$2"; shift 2 ;;
    --runsc) runsc="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "b7: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "b7: needs root" >&2; exit 2; }
[ -x "$runsc" ] || { echo "b7: $runsc missing (scripts/install-deps.sh installs runsc)" >&2; exit 2; }

work=$(mktemp -d /tmp/airlock-b7.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$repo/examples/summarize_spending.py" "$repo/examples/data/transactions.csv" "$work/"
clean_env=(env -i "PATH=/usr/sbin:/usr/bin:/sbin:/bin" "HOME=/root" "LANG=C.UTF-8")
bare_runsc=("${clean_env[@]}" "$runsc" --root="$work/runsc-state" --ignore-cgroups
            --network=none --platform=ptrace do)
mkdir -p "$work/runsc-state"

# One function per (program, runner): arrays keep the arguments as they are.
run_python_airlock() { "$airlock" run --isolation gvisor --no-stdin --lang python -c 'print(1)'; }
run_python_runsc() { "${bare_runsc[@]}" /usr/bin/python3 -c 'print(1)'; }
run_pandas_airlock() {
  "$airlock" run --isolation gvisor --no-stdin --file "$work/transactions.csv:transactions.csv" \
    "$work/summarize_spending.py"
}
run_pandas_runsc() { (cd "$work" && "${bare_runsc[@]}" /usr/bin/python3 summarize_spending.py); }
programs=(python)
$smoke || programs+=(pandas)

now_ms() { date +%s%N | awk '{printf "%.3f", $1 / 1e6}'; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

echo "B7 gVisor one-shot, cold, $runs interleaved rounds ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
printf '%-8s %-8s %10s %10s %10s %8s\n' program runner median_ms p10_ms p90_ms ratio
for prog in "${programs[@]}"; do
  declare -A samples=()
  # One warm-up of each (page cache, runsc's first start).
  for runner in airlock runsc; do
    "run_${prog}_${runner}" >/dev/null 2>&1 || {
      echo "b7: '$prog/$runner' failed:" >&2
      "run_${prog}_${runner}" 2>&1 | tail -3 >&2
      exit 1
    }
  done
  for ((i = 0; i < runs; i++)); do
    for runner in $(printf 'airlock\nrunsc\n' | shuf); do
      t0=$(now_ms)
      "run_${prog}_${runner}" >/dev/null 2>&1
      t1=$(now_ms)
      samples[$runner]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') "
    done
  done
  base=$(tr ' ' '\n' <<< "${samples[runsc]}" | grep . | median)
  for runner in runsc airlock; do
    sorted=$(tr ' ' '\n' <<< "${samples[$runner]}" | grep . | sort -n)
    med=$(median <<< "$sorted")
    n=$(wc -l <<< "$sorted")
    p10=$(sed -n "$(( (n + 9) / 10 ))p" <<< "$sorted")
    p90=$(sed -n "$(( (n * 9 + 9) / 10 ))p" <<< "$sorted")
    ratio=$(awk -v a="$med" -v b="$base" 'BEGIN {printf "%.2f", a / b}')
    printf '%-8s %-8s %10s %10s %10s %8s\n' "$prog" "$runner" "$med" "$p10" "$p90" "${ratio}x"
  done
  unset samples
done
