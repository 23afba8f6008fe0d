#!/usr/bin/env bash
# Image build (docs/images.md, bench/README.md): what making a store image costs here.
#   cold     `airlock image build` with --apt-cache none: every package downloaded
#   warm     the same spec with the host's apt cache (/var/cache/apt/archives), after one build
#            that filled it: mmdebstrap's own work (unpacking, dpkg, triggers) and no download
#   oci      the warm image turned into an OCI image archive with umoci (one layer) and tar
#   import   `airlock image import` of that archive: skopeo copy, the layer check, umoci unpack
#   first run  `airlock run` of the pandas example in the imported image (namespaces)
# and the image's size. Each figure is one run: a build is minutes, and the cache makes a second
# run a different measurement. Read them as orders of magnitude on a shared machine.
#
# Usage: bench/image_build.sh [--smoke] [--airlock PATH] [--keep]
#   --smoke   a small spec (variant essential, no packages), one build with the cache as it is
#             (CI keeps it working: about a minute)
#   --keep    keep the temporary store (its path is printed)
# Needs root (mmdebstrap's root mode, the store), mmdebstrap, skopeo and umoci, and about 1.5 GiB
# free under ${TMPDIR:-/tmp}.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
airlock="${AIRLOCK:-$repo/build/bin/airlock}"
smoke=false
keep=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=true; shift ;;
    --keep) keep=true; shift ;;
    --airlock) airlock="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "image-build: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$(id -u)" -eq 0 ]] || { echo "image-build: needs root" >&2; exit 1; }
for tool in mmdebstrap skopeo umoci; do
  command -v "$tool" >/dev/null || { echo "image-build: $tool is not installed" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/airlock-image-bench.XXXXXX")"
chmod 0755 "$work"
cleanup() { $keep && echo "store kept: $work/store" || rm -rf "$work"; }
trap cleanup EXIT
export AIRLOCK_IMAGE_STORE="$work/store"

if $smoke; then
  printf 'name = "bench"\n[debian]\nvariant = "essential"\n' >"$work/spec.toml"
else
  printf 'name = "bench"\n[debian]\npackages = ["python3", "python3-pandas"]\n' >"$work/spec.toml"
fi

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.1f'; }
step() {  # step LABEL COMMAND...: runs it with its output in $work/LABEL.log, prints seconds
  local label="$1" t0
  shift
  t0="$(now)"
  if ! nice -n 10 "$@" >"$work/$label.log" 2>&1; then
    echo "image-build: $label failed:" >&2
    tail -20 "$work/$label.log" >&2
    exit 1
  fi
  since "$t0"
}

declare -A secs
if ! $smoke; then
  secs[cold]="$(step cold "$airlock" image build "$work/spec.toml" --apt-cache none)"
  "$airlock" image rm bench >/dev/null
fi
if ! $smoke; then  # fills the host's apt cache (the smoke run takes the cache as it is)
  step fill "$airlock" image build "$work/spec.toml" >/dev/null
  "$airlock" image rm bench >/dev/null
fi
secs[warm]="$(step warm "$airlock" image build "$work/spec.toml")"
rootfs="$("$airlock" image inspect bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["rootfs"])')"
size_mib="$("$airlock" image inspect bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"] >> 20)')"

layout="$work/layout"
t0="$(now)"
nice -n 10 umoci init --layout "$layout" && nice -n 10 umoci new --image "$layout:latest" &&
  nice -n 10 umoci insert --image "$layout:latest" "$rootfs" / >"$work/oci.log" 2>&1 &&
  tar -C "$layout" -cf "$work/bench-oci.tar" .
secs[oci]="$(since "$t0")"
archive_mib=$(($(stat -c %s "$work/bench-oci.tar") >> 20))
secs[import]="$(step import "$airlock" image import "$work/bench-oci.tar" --name bench-oci)"

run_row="-"
if ! $smoke; then
  printf 'schema = 1\ndefault_profile = "img"\n[profiles.img.filesystem]\nimage = "bench-oci"\n' >"$work/policy.toml"
  secs[run]="$(step run "$airlock" run --policy "$work/policy.toml" --profile img \
    --file "$repo/examples/data/transactions.csv:transactions.csv" \
    "$repo/examples/summarize_spending.py")"
  run_row="${secs[run]}"
fi

echo
echo "image: $(tr '\n' ' ' <"$work/spec.toml")"
printf '%-34s %10s\n' "step" "seconds"
printf '%-34s %10s\n' "build, cold (no apt cache)" "${secs[cold]:--}"
printf '%-34s %10s\n' "build, warm (host apt cache)" "${secs[warm]}"
printf '%-34s %10s\n' "OCI archive (umoci insert + tar)" "${secs[oci]}"
printf '%-34s %10s\n' "import (skopeo, check, umoci)" "${secs[import]}"
printf '%-34s %10s\n' "first pandas run in the import" "$run_row"
printf '%-34s %10s\n' "image size (MiB)" "$size_mib"
printf '%-34s %10s\n' "OCI archive size (MiB)" "$archive_mib"
