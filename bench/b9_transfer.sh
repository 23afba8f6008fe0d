#!/usr/bin/env bash
# B9 transfer throughput (docs/performance.md, bench/README.md): a ~1 GiB uncompressed tar
# archive in (`airlock run --in DATA.tar:/home/user/data`) and a ~1 GiB directory out
# (`airlock run --out /home/user/data:OUT.tar`), side by side in the same run with the same
# bytes moved by hand: the archive piped into the sandbox on stdin and unpacked there by
# `tar -x`, and the directory packed by `tar -c` on the program's stdout, redirected to a file.
# Every arm is a whole `airlock run` of a shell program in a fresh sandbox; a base run of the
# same program without the transfer (in: `mkdir -p` of the target; out: the program that writes
# the files) is timed in the same rounds and subtracted, so the sandbox's start and the files'
# creation do not count. Prints medians, MiB/s = archive MiB / (median - base median), the ratio
# airlock / tar (target >= 0.9) and the peak RSS of the `airlock run` process (/usr/bin/time %M).
#
# Usage: bench/b9_transfer.sh [--smoke] [--runs N] [--size-mb N] [--retries N] [--airlock PATH]
#   --smoke      1 round of a 64 MiB dataset (CI keeps the script working with this; < 30 s)
#   --runs N     timed rounds (default 3, interleaved, shuffled order each round), after one
#                untimed round that checks what every arm moved (file count and bytes)
#   --retries N  times a run is repeated when airlock's agent dropped its stdin (more than 4 MiB
#                that the program or transfer helper had not read yet; a known airlock bug, see
#                bench/README.md B9) and the run failed or hung, default 4, each listed after the
#                table; 0: such a run fails the benchmark
#   --size-mb N  dataset size, a multiple of 16 from 32 to 1024 (default 1024): N/16 - 1 files of
#                16 MiB and 512 files of 16 KiB (N - 8 MiB of data). At most 1024: the `tar -c`
#                arm's archive comes out on stdout, which limits.output_bytes caps at 1 GiB
# Needs root (airlock creates namespaces and cgroups), about 4 x N MiB free under ${TMPDIR:-/tmp}
# and as much free memory (the sandbox's /home/user is a tmpfs). Exits non-zero when a run
# fails (or takes longer than 30 s + N/8 s), with its stderr; a missed target is a result, not
# an error.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
runs=3
retries=4
size_mb=1024
smoke=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=true; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --size-mb) size_mb="$2"; shift 2 ;;
    --retries) retries="$2"; shift 2 ;;
    --airlock) airlock="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "b9: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if $smoke; then runs=1; size_mb=64; fi
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "b9: --runs needs a positive integer" >&2; exit 2; }
[[ "$retries" =~ ^[0-9]+$ ]] || { echo "b9: --retries needs a count" >&2; exit 2; }
if ! [[ "$size_mb" =~ ^[0-9]+$ ]] || ((size_mb < 32 || size_mb > 1024 || size_mb % 16 != 0)); then
  echo "b9: --size-mb must be a multiple of 16 from 32 to 1024" >&2
  exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "b9: needs root" >&2; exit 2; }
[ -x "$airlock" ] || { echo "b9: $airlock missing (build it: ninja -C build airlock airlock-agent ...)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "b9: needs python3" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/airlock-b9.XXXXXX")"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The peak RSS of one command: /usr/bin/time's %M (KiB), else the same from python3's
# getrusage(RUSAGE_CHILDREN). Either is the largest of the `airlock run` process and of what it
# reaped itself (the sandbox's processes are counted only when one was larger).
if [[ -x /usr/bin/time ]]; then
  peak_rss() { local out="$1"; shift; /usr/bin/time -f %M -o "$out" "$@"; }
else
  peak_rss() {
    python3 -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc if rc >= 0 else 128 - rc)' "$@"
  }
fi

# --- the dataset: incompressible files, packed once as an uncompressed tar ---------------------
nbig=$((size_mb / 16 - 1))
small_n=512
small_size=16384
data_bytes=$((nbig * 16777216 + small_n * small_size))
mkdir -p "$work/dataset/big" "$work/dataset/small"
for ((i = 1; i <= nbig; i++)); do
  head -c 16777216 /dev/urandom >"$work/dataset/big/f$(printf '%03d' "$i")"
done
head -c $((small_n * small_size)) /dev/urandom | split -b "$small_size" -a 3 - "$work/dataset/small/s"
tar -c -f "$work/data.tar" -C "$work/dataset" .
rm -rf "$work/dataset"
archive_bytes=$(stat -c %s "$work/data.tar")
archive_mib=$(awk -v b="$archive_bytes" 'BEGIN {printf "%.1f", b / 1048576}')
nfiles=$((nbig + small_n))

# --- the policy: room for the data in the sandbox, and for the transfers ----------------------
workspace_mb=$((size_mb + 512))
cat >"$work/policy.toml" <<EOF
schema = 1
default_profile = "b9"

[profiles.b9]
description = "bench/b9_transfer.sh: room for a ${size_mb} MiB dataset in /home/user"
languages = ["shell"]

[profiles.b9.limits]
timeout_s = 900
workspace_mb = $workspace_mb
tmp_mb = 64
memory_mb = $((workspace_mb + 64 + 1024))
output_bytes = 1073741824

[profiles.b9.transfer]
plugins = ["archive"]

[profiles.b9.transfer.archive]
max_mb = $((size_mb * 2))
sandbox_max_mb = $((size_mb * 4))
EOF
if ! "$airlock" policy check "$work/policy.toml" >"$work/check.out" 2>&1; then
  echo "b9: the bench policy does not validate:" >&2
  cat "$work/check.out" >&2
  exit 1
fi

# --- the arms ------------------------------------------------------------------------------------
run=("$airlock" run --policy "$work/policy.toml" --profile b9 --lang shell)
data=/home/user/data
# The out program: the same tree as the dataset (zeros: nothing here compresses anything).
gen="mkdir -p $data/big $data/small && for i in \$(seq -w 1 $nbig); do head -c 16777216 /dev/zero > $data/big/f\$i; done && head -c $((small_n * small_size)) /dev/zero | split -b $small_size -a 3 - $data/small/s"
# The in programs print what arrived (files, bytes) in the untimed first round.
count="echo \$(find $data -type f | wc -l) \$((\$(find $data -type f -printf '%s+')0))"
arms=(in_base in_airlock in_tar out_base out_airlock out_tar)
run_timeout=$((30 + size_mb / 8))  # seconds; a 1 GiB arm takes 1-6 s on a 2-CPU VM
# The command of one arm ($cmd), its stdin and its stdout.
arm_cmd() {
  local arm="$1" check="$2" code
  stdin=/dev/null
  stdout="$work/stdout"
  case "$arm" in
    in_base) cmd=("${run[@]}" --no-stdin -c "mkdir -p $data") ;;
    in_airlock)
      code=true
      if $check; then code="$count"; fi
      cmd=("${run[@]}" --no-stdin --in "$work/data.tar:$data" -c "$code") ;;
    in_tar)
      code="mkdir -p $data && tar -x -f - -C $data"
      if $check; then code="$code && $count"; fi
      cmd=("${run[@]}" -c "$code")
      stdin="$work/data.tar" ;;
    out_base) cmd=("${run[@]}" --no-stdin -c "$gen") ;;
    out_airlock) cmd=("${run[@]}" --no-stdin --out "$data:$work/out.tar" -c "$gen") ;;
    out_tar)
      cmd=("${run[@]}" --no-stdin -c "$gen && tar -c -f - -C $data .")
      stdout="$work/out.tar" ;;
  esac
}

# Runs one arm once: appends its seconds and peak RSS (KiB) to $work/<arm>.t / .rss; on failure
# prints the command and its stderr and exits. The first round ($check) checks what moved.
once() {
  local arm="$1" check="$2" rc t0 t1 what="" attempt
  local -a cmd
  local stdin stdout
  arm_cmd "$arm" "$check"
  for ((attempt = 0; ; attempt++)); do
    rm -f "$work/out.tar" "$work/stdout"
    t0=$EPOCHREALTIME
    set +e
    peak_rss "$work/rss" timeout -k 10 "$run_timeout" "${cmd[@]}" <"$stdin" >"$stdout" 2>"$work/stderr"
    rc=$?
    set -e
    t1=$EPOCHREALTIME
    # airlock's agent drops stdin (and so a transfer's stream) that the program has not read
    # within 4 MiB: the run fails, or, when the supervisor was still feeding a regular file,
    # both ends wait on each other and it never ends (killed at $run_timeout s). Counted,
    # retried, listed after the table (bench/README.md, B9).
    if ((rc != 0 && attempt < retries)); then
      if grep -q 'bytes not yet read by the process.*data dropped' "$work/stderr"; then
        echo "$arm dropped" >>"$work/retried"
        continue
      fi
      if ((rc == 124 || rc == 137)) && [[ "$arm" == in_* ]]; then
        echo "$arm hung" >>"$work/retried"
        continue
      fi
    fi
    break
  done
  if ((rc != 0)); then
    what="exit $rc"
    if ((rc == 124 || rc == 137)); then what="$what: no end within $run_timeout s"; fi
  elif grep -q 'truncated' "$work/stderr"; then
    what="$(grep truncated "$work/stderr" | head -n 1)"
  elif $check; then
    case "$arm" in
      in_airlock|in_tar)
        [[ "$(cat "$work/stdout")" == "$nfiles $data_bytes" ]] ||
          what="expected '$nfiles $data_bytes' (files, bytes) in $data, got '$(head -c 80 "$work/stdout")'" ;;
      out_airlock|out_tar)
        local n
        n=$(tar -tv -f "$work/out.tar" 2>&1 | grep -c '^-') || true
        ((n == nfiles)) || what="expected $nfiles files in the archive, tar -t lists $n" ;;
    esac
  elif [[ "$arm" == out_airlock || "$arm" == out_tar ]]; then
    local got
    got=$(stat -c %s "$work/out.tar" 2>/dev/null || echo 0)
    ((got >= data_bytes)) || what="the archive has $got bytes, less than the $data_bytes of data"
  fi
  if [[ -n "$what" ]]; then
    echo "b9: $arm failed: $what" >&2
    printf '  %q' "${cmd[@]}" >&2
    echo " <$stdin >$stdout" >&2
    grep -v '^airlock: policy relaxation' "$work/stderr" | tail -n 20 >&2
    exit 1
  fi
  $check && return
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}' >>"$work/$arm.t"
  tail -n 1 "$work/rss" >>"$work/$arm.rss"
}

echo "B9 transfer throughput: ${archive_mib} MiB archive ($nfiles files, $data_bytes bytes of data)," \
  "$runs interleaved rounds ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
# Untimed: checks every arm moved the whole tree (and warms the page cache and the plugins).
for arm in "${arms[@]}"; do once "$arm" true; done
for ((r = 0; r < runs; r++)); do
  for arm in $(printf '%s\n' "${arms[@]}" | shuf); do once "$arm" false; done
done
rm -f "$work/out.tar"

# --- the table -----------------------------------------------------------------------------------
python3 - "$work" "$archive_bytes" <<'EOF'
import statistics, sys
work, archive_bytes = sys.argv[1], int(sys.argv[2])
mib = archive_bytes / 1048576
def load(arm, ext):
    with open(f"{work}/{arm}.{ext}") as f:
        return [float(x) for x in f.read().split()]
med = {a: statistics.median(load(a, "t")) for a in
       ("in_base", "in_airlock", "in_tar", "out_base", "out_airlock", "out_tar")}
rss = {a: max(load(a, "rss")) / 1024 for a in med}
rate = {}
for d in ("in", "out"):
    for arm in ("airlock", "tar"):
        net = med[f"{d}_{arm}"] - med[f"{d}_base"]
        rate[f"{d}_{arm}"] = mib / net if net > 0 else float("inf")
label = {
    "in_base": "in: base (`mkdir`, nothing moved)",
    "in_airlock": "in: airlock `--in DATA.tar:DIR`",
    "in_tar": "in: `tar -x` of the archive on stdin",
    "out_base": "out: base (writes the files)",
    "out_airlock": "out: airlock `--out DIR:OUT.tar`",
    "out_tar": "out: `tar -c` on stdout to a file",
}
print()
print("| arm | median s | minus base s | MiB/s | x tar | peak RSS MiB |")
print("| --- | --- | --- | --- | --- | --- |")
for a in med:
    d, arm = a.split("_")
    if arm == "base":
        print(f"| {label[a]} | {med[a]:.2f} | | | | {rss[a]:.0f} |")
        continue
    ratio = rate[a] / rate[f"{d}_tar"]
    print(f"| {label[a]} | {med[a]:.2f} | {med[a] - med[d + '_base']:.2f} | {rate[a]:.0f} "
          f"| {ratio:.2f} | {rss[a]:.0f} |")
print()
for d in ("in", "out"):
    ratio = rate[f"{d}_airlock"] / rate[f"{d}_tar"]
    verdict = "met" if ratio >= 0.9 else "missed"
    print(f"{d}: airlock {rate[d + '_airlock']:.0f} MiB/s, tar {rate[d + '_tar']:.0f} MiB/s: "
          f"{ratio:.2f}x (target >= 0.9x: {verdict}); supervisor peak RSS "
          f"{rss[d + '_airlock']:.0f} MiB against {rss[d + '_base']:.0f} MiB for the base run")
EOF
if [[ -s "$work/retried" ]]; then
  echo "retried: $(sort "$work/retried" | uniq -c | awk '{printf "%s%s %s x%s", (NR > 1 ? ", " : ""), $2, $3, $1}')" \
    "(airlock's agent dropped stdin the program had not read within 4 MiB; 'hung': killed at $run_timeout s)"
fi
echo "(${SECONDS}s in all; MiB/s = ${archive_mib} MiB / (median - base median))"

# Nothing of ours may outlive the script: every run above is waited for, so a process left
# with a sandbox uid (>= 2^28) would be a sandbox airlock did not remove.
left=$(ps -eo uid= | awk '$1 >= 268435456' | wc -l)
if ((left > 0)); then
  echo "b9: warning: $left processes with a sandbox uid are running (ours, or another airlock's)" >&2
fi
