#!/usr/bin/env bash
# B7, microVM (docs/performance.md, bench/README.md):
#   boot   QEMU's start to the agent's handshake against a bare QEMU boot of the same kernel and
#          initramfs to a marker at /init's first instruction (target <= 1.2x), interleaved,
#          and the idle host memory of a booted VM (build/bench/airlock_microvm_bench);
#   one-shot  `airlock run --isolation microvm` of Python print(1) and of the pandas CSV example
#          (examples/summarize_spending.py), cold, against the same runs on namespaces;
#   warm   create from the warm pool and a session round trip: service_bench.py's B2 and B3
#          with --isolation microvm (targets: create p50 <= 5 ms, round trip p50 <= 1 ms).
# Says which accelerator it ran with; under TCG (no usable KVM) every guest instruction is
# emulated and the one-shot rows are dominated by it.
#
# Usage: bench/b7_microvm.sh [--smoke] [--runs N] [--no-pandas]
#   --smoke   2 boot rounds, 2 print(1) runs, no pandas, no warm rows (CI keeps it working)
# Needs root, QEMU and `airlock image prepare`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
bench="$repo/build/bench/airlock_microvm_bench"
runs=5
smoke=false
pandas=true
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=true; runs=2; pandas=false; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --no-pandas) pandas=false; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "b7: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "b7: needs root" >&2; exit 2; }

# The accelerator `accel = "auto"` picks here, as the doctor reports it.
doctor_out=$("$airlock" doctor 2>/dev/null || true)
accel=tcg
if grep -Eq '^backend microvm .*accel kvm' <<< "$doctor_out"; then accel=kvm; fi
echo "== B7 microVM ($(nproc) CPUs, accel $accel, load $(cut -d' ' -f1 /proc/loadavg))"
"$bench" --rounds "$runs" --accel "$accel"

work=$(mktemp -d /tmp/airlock-b7m.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$repo/examples/summarize_spending.py" "$repo/examples/data/transactions.csv" "$work/"
now_ms() { date +%s%N | awk '{printf "%.0f", $1 / 1e6}'; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'; }
oneshot() {  # backend, then the run's arguments
  local backend=$1; shift
  "$airlock" run --isolation "$backend" --no-stdin --timeout 600 "$@" >/dev/null 2>&1
}
row() {  # label, runs, run arguments...
  local label=$1 n=$2; shift 2
  local -A s=()
  for ((i = 0; i < n; i++)); do
    for backend in $(printf 'microvm\nnamespaces\n' | shuf); do
      t0=$(now_ms); oneshot "$backend" "$@" || { echo "b7: $label on $backend failed" >&2; exit 1; }
      s[$backend]+="$(( $(now_ms) - t0 )) "
    done
  done
  local m n2
  m=$(tr ' ' '\n' <<< "${s[microvm]}" | grep . | median)
  n2=$(tr ' ' '\n' <<< "${s[namespaces]}" | grep . | median)
  printf '%-26s %12s %14s %8s\n' "$label" "$m" "$n2" "$(awk -v a="$m" -v b="$n2" 'BEGIN {printf "%.1f", a / b}')"
}
echo
echo "one-shot airlock run, cold, medians of $runs interleaved runs"
printf '%-26s %12s %14s %8s\n' program microvm_ms namespaces_ms ratio
row "python print(1)" "$runs" --lang python -c 'print(1)'
if $pandas; then
  row "pandas CSV example" 2 --file "$work/transactions.csv:transactions.csv" "$work/summarize_spending.py"
fi
if ! $smoke; then
  echo
  python3 "$repo/bench/service_bench.py" --isolation microvm --only B2,B3 --smoke
fi
