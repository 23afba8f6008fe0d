#!/usr/bin/env bash
# The Debian package, tested as an operator would install it: a fresh Debian 12 root made by
# mmdebstrap with the .deb installed by apt (so its declared Depends must be enough), then, from
# the installed files only, `airlock doctor` and the pandas example run in a sandbox.
#
#   scripts/test-deb.sh [PACKAGE.deb]      default: what scripts/package.sh builds
#
# Needs root, mmdebstrap and the Debian mirror. Everything is mounted in a private mount namespace,
# so no mount outlives the script, and the root is removed at the end. Downloaded packages are kept
# in /var/cache/airlock-test-deb between runs (only the download is cached, never the root).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "test-deb: needs root (mmdebstrap, chroot, mounts)" >&2
  exit 1
fi
command -v mmdebstrap >/dev/null || { echo "test-deb: mmdebstrap is not installed" >&2; exit 1; }

started=$(date +%s)
deb="${1:-}"
if [ -z "$deb" ]; then
  deb="$(bash scripts/package.sh | tail -n 1)"
fi
deb="$(realpath "$deb")"
[ -f "$deb" ] || { echo "test-deb: no package at $deb" >&2; exit 1; }
case "$(basename "$deb")" in
  airlock_*_amd64.deb) ;;
  *) echo "test-deb: $deb is not named airlock_<version>_amd64.deb" >&2; exit 1 ;;
esac
echo "test-deb: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"

cache=/var/cache/airlock-test-deb
mkdir -p "$cache"
root="$(mktemp -d /var/tmp/airlock-deb-root.XXXXXX)"
cleanup() {
  # Mounts died with the namespace; only the directory is left to remove.
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

# The pandas example needs pandas, which the package only recommends. The package itself is
# installed by apt inside the root (a path given to --include is not reachable from the chroot's
# dpkg), so its Depends are resolved from the archive as on an operator's machine.
mmdebstrap --quiet --variant=apt --dpkgopt=force-unsafe-io --include=python3-pandas \
  --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives/" \
  --setup-hook="sync-in '$cache' /var/cache/apt/archives/" \
  --customize-hook="copy-in '$deb' /tmp" \
  --customize-hook="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get install --yes \
      --quiet=2 --no-install-recommends /tmp/$(basename "$deb")" \
  --customize-hook="rm -f \"\$1\"/tmp/$(basename "$deb")" \
  --customize-hook="sync-out /var/cache/apt/archives '$cache'" \
  --skip=essential/unlink \
  bookworm "$root"
rm -f "$cache"/airlock_*.deb
echo "test-deb: root made in $(( $(date +%s) - started )) s"

# What the package must have laid down.
for f in usr/bin/airlock usr/libexec/airlock/airlock-agent \
    usr/lib/airlock/plugins/isolation-namespaces.so usr/lib/airlock/plugins/language-python.so \
    etc/airlock/policy.toml usr/lib/systemd/system/airlock.service \
    usr/share/doc/airlock/operations.md usr/share/doc/airlock/security.md \
    usr/share/doc/airlock/examples/summarize_spending.py; do
  [ -e "$root/$f" ] || { echo "test-deb: the package did not install /$f" >&2; exit 1; }
done
grep -qx '/etc/airlock/policy.toml' "$root/var/lib/dpkg/info/airlock.conffiles" ||
  { echo "test-deb: /etc/airlock/policy.toml is not a conffile" >&2; exit 1; }
grep -q '^airlock:' "$root/etc/group" ||
  { echo "test-deb: postinst did not create the airlock group" >&2; exit 1; }
grep -q '^Documentation=file:/usr/share/doc/airlock/operations.md' \
  "$root/usr/lib/systemd/system/airlock.service" ||
  { echo "test-deb: the unit's Documentation= is not the installed operations.md" >&2; exit 1; }

# Inside the root, in a private mount namespace: the kernel's /proc, /sys (with cgroup2 and
# bpffs) and /dev, and the host's /run, so sandbox uid leases, network slots and audit locks are
# the same files every other airlock process on this host uses. The namespace then pivot_roots
# into the root rather than chroot: the kernel refuses user namespaces (CLONE_NEWUSER, EPERM) to
# a chrooted process, and the namespaces backend needs them. `--local` runs the example in this
# process, never through a supervisor that may listen on the host's socket.
unshare -m --propagation private bash -euo pipefail -c '
  root="$1"
  mount --bind "$root" "$root"  # pivot_root needs the new root to be a mount point
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --rbind /run "$root/run"
  mount -t tmpfs tmpfs "$root/tmp"
  cd "$root"
  pivot_root . mnt
  # The root has no mount(8), which is not essential: the umount of the host runs, on the
  # libraries of the root (both Debian 12).
  /mnt/usr/bin/umount -l /mnt
  cd /
  export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
  echo "== airlock doctor (installed) =="
  env -i PATH="$PATH" HOME="$HOME" airlock doctor
  echo "== airlock run of the installed pandas example =="
  cd /usr/share/doc/airlock/examples
  out="$(env -i PATH="$PATH" HOME="$HOME" airlock run --local \
    --file data/transactions.csv:transactions.csv summarize_spending.py)"
  printf "%s\n" "$out"
  # The example prints totals by category; one category of examples/data/transactions.csv.
  grep -q "groceries" <<<"$out" || { echo "test-deb: the example printed no summary" >&2; exit 1; }
' test-deb "$root"

echo "test-deb: passed in $(( $(date +%s) - started )) s"
