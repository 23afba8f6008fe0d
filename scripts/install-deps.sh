#!/usr/bin/env bash
# Installs everything airlock needs to build, test and benchmark, from Debian 12 packages only.
# Idempotent: packages already present are skipped by apt. Must run as root.
#   --runtime   only what building airlock and running it need (scripts/setup.sh): not the
#               packages below that only tests, benchmarks or the optional backends use
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: run as root (apt-get needs it)" >&2
  exit 1
fi

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang llvm clang-format
  # persistent workspaces: mkfs.ext4
  e2fsprogs
  # libraries the supervisor links
  libboost-dev libboost-program-options-dev libboost-filesystem-dev
  libseccomp-dev libtomlplusplus-dev nlohmann-json3-dev libcap-dev libssl-dev libre2-dev
  # the supervisor's operational log (supervisor/log/): spdlog, with its fmt
  libspdlog-dev
  # sandbox networks beyond loopback: veth and addresses (rtnetlink), NAT table (supervisor/net/)
  libnl-route-3-dev libnftables-dev nftables
  # eBPF toolchain and what a static libbpf links (bpf/, supervisor/audit/)
  libbpf-dev bpftool libelf-dev zlib1g-dev
  # tests
  libgtest-dev libgmock-dev iproute2 util-linux procps
  # the remote-access test makes its CA and certificates with the openssl CLI (tests/remote)
  openssl
  # sandbox runtimes and the data-science stack the examples use
  python3 python3-numpy python3-pandas python3-matplotlib python3-reportlab
  # the Python SDK's HTTP client (sdk/python), for its tests
  python3-httpx
  # pip inside sandboxes, through the package proxy (docs/packages.md)
  python3-pip
  # Python code contexts run on IPython (docs/contexts.md)
  python3-ipython
  # the microvm backend: QEMU, the guest kernel (Debian's own), erofs images, the initramfs
  # writer (libarchive) and the kernel unpacker (liblzma)
  qemu-system-x86 linux-image-amd64 erofs-utils libarchive-dev liblzma-dev
  # the image store (docs/images.md): root filesystems from the Debian archive (mmdebstrap) and
  # OCI image archives copied (skopeo) and unpacked (umoci); libarchive checks their layers
  mmdebstrap skopeo umoci
  # what the static agent's transfer helper links with libarchive (zstd, lz4, ACLs)
  libzstd-dev liblz4-dev libacl1-dev libattr1-dev
  # the status page's browser test drives headless Chromium (tests/ui)
  chromium
  # peers for side-by-side benchmarks
  bubblewrap firejail runsc hyperfine
  # the fleet's proxy (docs/deploy.md): the simulated fleet test and benchmark run it
  haproxy
)

# --runtime: these serve the test suite, the benchmarks and the optional gVisor/microVM backends
# and image store, and are left out (scripts/test.sh runs this script again without --runtime).
# Keep new packages in the list above; name them here too when `airlock run` does not need them.
runtime_only=0
[ "${1:-}" = --runtime ] && runtime_only=1
if [ "$runtime_only" -eq 1 ]; then
  not_runtime=" clang-format libgtest-dev libgmock-dev openssl python3-httpx qemu-system-x86
    linux-image-amd64 erofs-utils mmdebstrap skopeo umoci bubblewrap firejail runsc hyperfine
    haproxy "
  kept=()
  for p in "${packages[@]}"; do
    [[ "$not_runtime" == *[[:space:]]"$p"[[:space:]]* ]] || kept+=("$p")
  done
  packages=("${kept[@]}")
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  # Debian's haproxy package would start its service on install; the tests run their own
  # HAProxy and nothing may be left running. policy-rc.d (Debian's invoke-rc.d policy) says
  # "no service starts" for this install only.
  added_policy_rc=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    added_policy_rc=1
  fi
  rc=0
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
  [ "$added_policy_rc" -eq 0 ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" -eq 0 ] || exit "$rc"
fi
# Node comes from the machine image (NodeSource 20) where present; Debian's nodejs otherwise.
command -v node >/dev/null || apt-get install -y -qq --no-install-recommends nodejs
command -v npm >/dev/null || apt-get install -y -qq --no-install-recommends npm
[ "$runtime_only" -eq 1 ] && { echo "install-deps: runtime dependencies present"; exit 0; }
# The TypeScript SDK's build and tests, the MCP end-to-end test's official client and the status
# page test's browser driver (playwright-core) come from the npm registry, pinned by their
# package-lock.json files.
root="$(cd "$(dirname "$0")/.." && pwd)"
# Installed again when the lock file changed since (npm's own record of what it installed is
# node_modules/.package-lock.json).
for dir in sdk/typescript tests/mcp tests/ui deploy/kubernetes/validate; do
  lock="$root/$dir/package-lock.json"
  installed="$root/$dir/node_modules/.package-lock.json"
  [ -f "$lock" ] && { [ ! -f "$installed" ] || [ "$lock" -nt "$installed" ]; } &&
    npm ci --prefix "$root/$dir" --no-audit --no-fund --loglevel=error
  true
done
echo "install-deps: all dependencies present"
