#!/usr/bin/env bash
# B9 mounts (docs/performance.md, bench/README.md): how fast a sandbox reads an operator's
# directory mounted at create (`"mounts"`, docs/transfer.md) on each backend, against the floor
# of the same backend in the same run: the same bytes read from the sandbox's own /home/user.
# One `airlock serve` on a private socket; per backend one sandbox with the dataset directory
# mounted read-only at /mnt/data. In it, each round times (inside, with `date +%s%N`) `cat` of
# every file of the mount to /dev/null (read), then of a copy of them in /home/user (its floor),
# and `cp` of that copy into a writable mount (write), against two floors: the host's own `cp` of
# the same files into the same directory, and the sandbox's `cp` of them within /home/user (what
# the backend's CPU costs a copy). Prints MiB/s medians and mount/floor ratios.
# The namespaces and gVisor backends bind the directory; microVM serves it over virtio-9p.
#
# Usage: bench/b9_mounts.sh [--smoke] [--runs N] [--size-mb N] [--backends LIST] [--airlock PATH]
#   --smoke        1 round of 16 MiB on every backend available (CI keeps the script working)
#   --runs N       timed rounds (default 3)
#   --size-mb N    dataset size, a multiple of 4 from 4 to 1024 (default 256): files of 4 MiB
#   --backends L   comma-separated, of namespaces,gvisor,microvm (default: those installed)
# Needs root (airlock serve creates namespaces and cgroups) and 3 x N MiB free under
# ${TMPDIR:-/tmp}. Exits non-zero when a step fails, with its output.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
runs=3
size_mb=256
smoke=false
backends=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=true; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --size-mb) size_mb="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --airlock) airlock="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "b9-mounts: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if $smoke; then runs=1; size_mb=16; fi
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "b9-mounts: --runs needs a positive integer" >&2; exit 2; }
if ! [[ "$size_mb" =~ ^[0-9]+$ ]] || ((size_mb < 4 || size_mb > 1024 || size_mb % 4 != 0)); then
  echo "b9-mounts: --size-mb must be a multiple of 4 from 4 to 1024" >&2
  exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "b9-mounts: needs root" >&2; exit 2; }
[ -x "$airlock" ] || { echo "b9-mounts: $airlock missing (build it first)" >&2; exit 2; }
if [[ -z "$backends" ]]; then
  backends=namespaces
  [[ -x /usr/bin/runsc ]] && backends+=",gvisor"
  [[ -x /usr/bin/qemu-system-x86_64 ]] && backends+=",microvm"
fi
IFS=, read -r -a backend_list <<<"$backends"
for b in "${backend_list[@]}"; do
  case "$b" in namespaces|gvisor|microvm) ;; *) echo "b9-mounts: unknown backend '$b'" >&2; exit 2 ;; esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/airlock-b9m.XXXXXX")"
chmod 0755 "$work"  # the sandboxes' ids reach their scratch space beneath it
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]]; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the dataset: incompressible 4 MiB files, and an empty world-writable directory -------------
nfiles=$((size_mb / 4))
mkdir -p "$work/data" "$work/out"
chmod 0777 "$work/out"
for ((i = 1; i <= nfiles; i++)); do
  head -c 4194304 /dev/urandom >"$work/data/f$(printf '%04d' "$i")"
done

# --- the policy: one profile per backend, each with room for a copy of the data --------------
home_mb=$((2 * size_mb + 64))  # the copy, and the in-sandbox write floor's
{
  echo 'schema = 1'
  echo "default_profile = \"${backend_list[0]}\""
  echo '[transfer]'
  echo 'writable_roots = ["out"]'
  echo '[transfer.roots]'
  echo "data = \"$work/data\""
  echo "out = \"$work/out\""
  for b in "${backend_list[@]}"; do
    cat <<EOF
[profiles.$b]
isolation = "$b"
languages = ["shell"]
[profiles.$b.limits]
timeout_s = 600
workspace_mb = $home_mb
memory_mb = $((home_mb + 512))
[profiles.$b.transfer]
plugins = ["hostdir"]
[profiles.$b.transfer.hostdir]
roots = ["data", "out"]
EOF
  done
} >"$work/policy.toml"
"$airlock" policy check "$work/policy.toml" >"$work/check.out" 2>&1 ||
  { echo "b9-mounts: the bench policy does not validate:" >&2; cat "$work/check.out" >&2; exit 1; }

export AIRLOCK_URL="unix://$work/airlock.sock"
"$airlock" serve --policy "$work/policy.toml" --socket "$work/airlock.sock" \
  --state-dir "$work/state" >"$work/serve.log" 2>&1 &
serve_pid=$!
for ((i = 0; i < 200; i++)); do
  [[ -S "$work/airlock.sock" ]] && break
  kill -0 "$serve_pid" 2>/dev/null || { echo "b9-mounts: airlock serve ended:" >&2; tail -n 20 "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done

# Seconds a shell command takes inside sandbox $1, timed inside (no API round trip counted).
timed() {
  local sb="$1" code="$2" out
  out=$("$airlock" exec "$sb" -t 600 --cmd "set -e; t0=\$(date +%s%N); $code; t1=\$(date +%s%N); echo \$((t1 - t0))") ||
    { echo "b9-mounts: '$code' failed in $sb" >&2; tail -n 20 "$work/serve.log" >&2; exit 1; }
  awk -v ns="${out##*$'\n'}" 'BEGIN {printf "%.4f\n", ns / 1e9}'
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
rate() { awk -v mb="$size_mb" -v s="$1" 'BEGIN {printf "%.0f", mb / s}'; }

printf 'B9 mounts: %d MiB in %d files of 4 MiB, %d round(s), medians; MiB/s\n' "$size_mb" "$nfiles" "$runs"
printf '%-11s %9s %9s %7s %9s %9s %7s %9s %7s\n' backend read floor ratio write host ratio inside ratio
for b in "${backend_list[@]}"; do
  sb=$("$airlock" sandbox create -p "$b" --mount hostdir:data:/mnt/data --mount hostdir:out:/mnt/out:rw) ||
    { echo "b9-mounts: creating a $b sandbox failed" >&2; tail -n 20 "$work/serve.log" >&2; exit 1; }
  # Checks what the mount holds, and makes the floor's copy.
  got=$("$airlock" exec "$sb" --cmd "ls /mnt/data | wc -l; mkdir /home/user/copy && cp /mnt/data/* /home/user/copy/ && cat /home/user/copy/* | wc -c")
  [[ "$got" == "$nfiles"$'\n'"$((size_mb * 1048576))" ]] ||
    { echo "b9-mounts: $b: expected $nfiles files of $size_mb MiB in the mount, got '$got'" >&2; exit 1; }
  : >"$work/r" && : >"$work/rf" && : >"$work/w" && : >"$work/wf" && : >"$work/wi"
  for ((r = 0; r < runs; r++)); do
    timed "$sb" "cat /mnt/data/* >/dev/null" >>"$work/r"
    timed "$sb" "cat /home/user/copy/* >/dev/null" >>"$work/rf"
    timed "$sb" "rm -rf /mnt/out/w; mkdir /mnt/out/w && cp /home/user/copy/* /mnt/out/w/" >>"$work/w"
    timed "$sb" "rm -rf /home/user/w; mkdir /home/user/w && cp /home/user/copy/* /home/user/w/" >>"$work/wi"
    rm -rf "$work/out/h" && mkdir "$work/out/h"
    t0=$EPOCHREALTIME
    cp "$work/data"/* "$work/out/h/"
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}' >>"$work/wf"
  done
  written=$(cat "$work/out/w"/* | wc -c)
  ((written == size_mb * 1048576)) ||
    { echo "b9-mounts: $b: the host got $written bytes of the $((size_mb * 1048576)) written" >&2; exit 1; }
  "$airlock" sandbox rm "$sb" >/dev/null
  rm -rf "$work/out/w" "$work/out/h"
  read_s=$(median <"$work/r") rf_s=$(median <"$work/rf") w_s=$(median <"$work/w")
  wf_s=$(median <"$work/wf") wi_s=$(median <"$work/wi")
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
  printf '%-11s %9s %9s %7s %9s %9s %7s %9s %7s\n' "$b" "$(rate "$read_s")" "$(rate "$rf_s")" \
    "$(ratio "$rf_s" "$read_s")" "$(rate "$w_s")" "$(rate "$wf_s")" "$(ratio "$wf_s" "$w_s")" \
    "$(rate "$wi_s")" "$(ratio "$wi_s" "$w_s")"
done
echo "read floor: the same files read from the sandbox's own /home/user (tmpfs; a microVM's is in guest RAM)"
echo "write: cp from /home/user into the writable mount; host: the host's own cp of the same files"
echo "into the same directory; inside: the sandbox's cp of them within /home/user (no sync anywhere)"
