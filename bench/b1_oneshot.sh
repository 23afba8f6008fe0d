#!/usr/bin/env bash
# B1 one-shot (docs: /work/shared/design/PERFORMANCE.md, bench/README.md): `airlock run` of
# print(1) / console.log(1) / true, cold (a new sandbox per run), default policy, measured side by
# side with the bare interpreter, bwrap --unshare-all, runsc do and firejail in the same run.
# "bwrap+pid1" is bwrap with a minimal static PID 1 (bench/floor/min_pid1.cc) in front of the
# program: the floor of any design that, like airlock's, execs an agent between the two.
#
# Usage: bench/b1_oneshot.sh [--smoke] [--runs N] [--airlock PATH] [--langs "python node shell"]
#                            [--json FILE]
#   --smoke   3 runs, Python only (CI keeps the script working with this; < 30 s)
#   --runs N  timed runs per command (default 30), after 2 warm-up runs (1 with --smoke)
#   --json    also write every measurement as JSON to FILE
# Needs root (airlock creates namespaces and cgroups). Commands of one language are timed in
# interleaved rounds (shuffled order each round). A comparison that cannot run here is listed
# with the reason.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=30
warmup=2
langs="python node shell"
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
min_pid1="$repo/build/bench/airlock_min_pid1"
json_out=""
py=/usr/bin/python3
# Every command runs with the same minimal environment airlock gives its programs: a host variable
# such as NODE_EXTRA_CA_CERTS (which makes node parse a CA bundle at start) would otherwise tax
# the comparisons and not airlock.
clean_env=(env -i "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
           "HOME=${HOME:-/root}" "LANG=C.UTF-8")

while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) runs=3; warmup=1; langs="python"; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --airlock) airlock="$2"; shift 2 ;;
    --langs) langs="${2//,/ }"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "b1: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

work="$(mktemp -d /tmp/airlock-b1-XXXXXX)"

# On cgroup v1/hybrid hosts each sandbox is moved into its v1 cgroups after clone, and the kernel
# waits an RCU grace period for that unless a cgroup root has `favordynmods` (see
# `airlock doctor`). The "airlock-fdm" row measures airlock with that host setting turned on for
# its duration only; the original cgroup2 options are put back on exit, however the script ends.
cg2="$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)"
cg2_opts_before=""
fdm_row=false
if [[ -n "$cg2" ]] && awk '$3 == "cgroup" {found=1} END {exit !found}' /proc/mounts &&
   ! grep -q "^cgroup2 $cg2 .*favordynmods" /proc/mounts && [[ $(id -u) -eq 0 ]]; then
  cg2_opts_before="$(awk -v m="$cg2" '$2 == m {print $4}' /proc/mounts)"
  fdm_row=true
fi
# Sets the cgroup2 mount's own options exactly (mount(8) would merge in the old ones).
set_cg2_opts() {
  "$py" - "$cg2" "$1" <<'EOF'
import ctypes, os, sys
keep = {"nsdelegate", "memory_localevents", "memory_recursiveprot", "memory_hugetlb_accounting",
        "favordynmods"}
data = ",".join(o for o in sys.argv[2].split(",") if o in keep).encode()
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(None, sys.argv[1].encode(), b"cgroup2", 32, data) != 0:  # MS_REMOUNT
    sys.exit("b1: remount " + sys.argv[1] + ": " + os.strerror(ctypes.get_errno()))
EOF
}
cleanup() {
  if [[ -n "$cg2_opts_before" ]]; then set_cg2_opts "$cg2_opts_before"; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The program of each language, bare, and what it must print.
bare_cmd() {
  case "$1" in
    python) printf '%s\n' "/usr/bin/python3 -c print(1)" ;;
    node) printf '%s\n' "/usr/bin/node -e console.log(1)" ;;
    shell) printf '%s\n' "/usr/bin/bash -c true" ;;
  esac
}
expected_out() { case "$1" in shell) echo "" ;; *) echo "1" ;; esac; }
airlock_code() { case "$1" in python) echo "print(1)" ;; node) echo "console.log(1)" ;; shell) echo "true" ;; esac; }

# Runners: name and the prefix put before the bare command (airlock is special-cased).
runners="bare airlock bwrap bwrap+pid1 runsc firejail"
if $fdm_row; then runners="bare airlock airlock-fdm bwrap bwrap+pid1 runsc firejail"; fi
prefix() {
  case "$1" in
    bare) echo "" ;;
    bwrap) echo "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --" ;;
    # The binary is bound into bwrap's /tmp: the repository may itself be under /tmp.
    bwrap+pid1) echo "$(prefix bwrap | sed 's/ --$//') --ro-bind $min_pid1 /tmp/airlock-min-pid1 -- /tmp/airlock-min-pid1" ;;
    runsc) echo "runsc --network=none do" ;;
    firejail) echo "firejail --quiet --noprofile" ;;
  esac
}

# argv of one runner for one language, one word per line (no shell quoting needed).
argv_of() {
  local runner="$1" lang="$2"
  if [[ "$runner" == airlock || "$runner" == airlock-fdm ]]; then
    printf '%s\n' "$airlock" run --no-stdin --lang "$lang" -c "$(airlock_code "$lang")"
  else
    # shellcheck disable=SC2046
    printf '%s\n' $(prefix "$runner") $(bare_cmd "$lang")
  fi
}

# Runs one command once and explains why it cannot be benchmarked, or prints nothing.
preflight() {
  local runner="$1" lang="$2" out err rc
  local -a argv
  mapfile -t argv < <(argv_of "$runner" "$lang")
  if ! command -v "${argv[0]}" >/dev/null 2>&1 && [[ ! -x "${argv[0]}" ]]; then
    echo "not installed (${argv[0]})"
    return
  fi
  if [[ "$runner" == bwrap+pid1 && ! -x "$min_pid1" ]]; then
    echo "not built ($min_pid1)"
    return
  fi
  if [[ "$runner" == airlock* && $(id -u) -ne 0 ]]; then
    echo "needs root"
    return
  fi
  set +e
  out="$("${clean_env[@]}" timeout 120 "${argv[@]}" </dev/null 2>"$work/preflight.err")"
  rc=$?
  set -e
  if [[ $rc -ne 0 ]]; then
    err="$(grep -v '^\s*$' "$work/preflight.err" | tail -n 1 | cut -c1-90)"
    echo "fails here: exit $rc${err:+: $err}"
  elif [[ "$out" != "$(expected_out "$lang")" ]]; then
    echo "wrong output: '$(printf '%s' "$out" | head -c 40)'"
  fi
}

# Times every runner of one language, interleaved: each round runs every command once, in a
# shuffled order, so a noisy machine's drift falls on all of them alike and the ratios stay
# meaningful. Writes "runner<TAB>t1,t2,..." (seconds) lines to $2; argv files are in $work.
# The airlock-fdm runs get favordynmods on the cgroup2 root just around each run (untimed).
measure_interleaved() {
  local lang="$1" out="$2"
  "${clean_env[@]}" "$py" - "$warmup" "$runs" "$work" "$cg2" "$cg2_opts_before" "$lang" \
    "${ok_runners[@]}" >"$out" <<'EOF'
import ctypes, os, random, subprocess, sys, time
warmup, runs, work, cg2, cg2_opts, lang = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:7]
runners = sys.argv[7:]
argv = {r: open(f"{work}/argv.{lang}.{r}").read().split("\0")[:-1] for r in runners}
keep = {"nsdelegate", "memory_localevents", "memory_recursiveprot", "memory_hugetlb_accounting"}
libc = ctypes.CDLL(None, use_errno=True)
def cg2_set(favor):
    opts = [o for o in cg2_opts.split(",") if o in keep] + (["favordynmods"] if favor else [])
    if libc.mount(None, cg2.encode(), b"cgroup2", 32, ",".join(opts).encode()) != 0:
        sys.exit(f"b1: remount {cg2}: {os.strerror(ctypes.get_errno())}")
times = {r: [] for r in runners}
for i in range(warmup + runs):
    order = runners[:]
    random.shuffle(order)
    for r in order:
        fdm = r == "airlock-fdm"
        if fdm:
            cg2_set(True)
        t = time.perf_counter()
        subprocess.run(argv[r], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        dt = time.perf_counter() - t
        if fdm:
            cg2_set(False)
        if i >= warmup:
            times[r].append(dt)
for r in runners:
    print(r + "\t" + ",".join(f"{x:.6f}" for x in times[r]))
EOF
}

echo "B1 one-shot: $runs runs per command after $warmup warm-up, $(nproc) CPUs, kernel $(uname -r)"
echo "airlock: $airlock"
echo "timer: interleaved rounds in shuffled order (python perf_counter around each run)"
echo

results="$work/results.tsv"
: >"$results"
for lang in $langs; do
  ok_runners=()
  for runner in $runners; do
    reason="$(preflight "$runner" "$lang")"
    if [[ -n "$reason" ]]; then
      printf '%s\t%s\tNA\t%s\n' "$lang" "$runner" "$reason" >>"$results"
      continue
    fi
    argv_of "$runner" "$lang" | tr '\n' '\0' >"$work/argv.$lang.$runner"
    ok_runners+=("$runner")
  done
  if measure_interleaved "$lang" "$work/times"; then
    while IFS=$'\t' read -r runner data; do
      printf '%s\t%s\tOK\t%s\n' "$lang" "$runner" "$data" >>"$results"
    done <"$work/times"
  else
    for runner in "${ok_runners[@]}"; do
      printf '%s\t%s\tNA\t%s\n' "$lang" "$runner" "failed during the timed runs" >>"$results"
    done
  fi
done

"$py" - "$results" "$json_out" <<'EOF'
import json, statistics, sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
out = []
def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

bare = {}
for lang, runner, state, data in rows:
    if runner == "bare" and state == "OK":
        bare[lang] = statistics.median(float(x) for x in data.split(","))

hdr = f"{'language':<8} {'runner':<11} {'median ms':>10} {'p90 ms':>9} {'x bare':>7} {'+ms':>8}"
print(hdr)
print("-" * len(hdr))
for lang, runner, state, data in rows:
    rec = {"language": lang, "runner": runner}
    if state != "OK":
        print(f"{lang:<8} {runner:<11} {'-':>10} {'-':>9} {'-':>7} {'-':>8}  ({data})")
        rec["unavailable"] = data
    else:
        t = [float(x) * 1000 for x in data.split(",")]
        med, p90 = statistics.median(t), pct(t, 0.9)
        b = bare.get(lang)
        ratio = f"{med / (b * 1000):.2f}" if b else "-"
        extra = f"{med - b * 1000:+.1f}" if b else "-"
        print(f"{lang:<8} {runner:<11} {med:>10.1f} {p90:>9.1f} {ratio:>7} {extra:>8}")
        rec.update(median_ms=med, p90_ms=p90, runs=len(t),
                   ratio_vs_bare=(med / (b * 1000)) if b else None,
                   overhead_ms=(med - b * 1000) if b else None)
    out.append(rec)
if sys.argv[2]:
    json.dump({"benchmark": "B1", "results": out}, open(sys.argv[2], "w"), indent=1)
EOF
