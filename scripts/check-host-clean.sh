#!/usr/bin/env bash
# Fails when airlock left anything on this host: mounts, cgroups, lock files of live sandboxes,
# sandbox network links or airlock's nftables table, or processes running as a sandbox uid
# (>= 2^28). CI runs it after the test suite.
set -uo pipefail
problems=()
m=$(grep -c -i airlock /proc/self/mountinfo)
[ "$m" -eq 0 ] || problems+=("$m mounts mention airlock")
c=$(find /sys/fs/cgroup -maxdepth 3 -path '*/airlock*' -type d 2>/dev/null | wc -l)
[ "$c" -eq 0 ] || problems+=("$c cgroup directories under */airlock (sandboxes, or their parent: airlock audit unload removes one kept for the pinned engine)")
l=$(find /run/airlock/sandboxes -name '*.lock' 2>/dev/null | wc -l)
[ "$l" -eq 0 ] || problems+=("$l sandbox lock files in /run/airlock/sandboxes")
# Backends' per-sandbox files (<state_dir>/rootfs/<id>: gVisor's bundle and runsc state).
s=$(find /run/airlock/rootfs -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
[ "$s" -eq 0 ] || problems+=("$s backend scratch directories in /run/airlock/rootfs")
# gVisor: runsc processes (monitor, sentry, gofer) and cgroups runsc made itself (runsc-<pid>).
# (the sentry and gofer re-exec runsc as "exe": match the binary, not the name)
r=$(for p in /proc/[0-9]*; do readlink "$p/exe" 2>/dev/null; done | grep -c '/runsc$')
[ "$r" -eq 0 ] || problems+=("$r runsc processes")
g=$(find /sys/fs/cgroup -maxdepth 2 -name 'runsc-*' -type d 2>/dev/null | wc -l)
[ "$g" -eq 0 ] || problems+=("$g cgroups named runsc-*")
# Sandbox networks (docs/network.md): host ends of veth pairs and airlock's nftables table.
n=$(ip -o link show 2>/dev/null | grep -c ': al-')
[ "$n" -eq 0 ] || problems+=("$n sandbox network links (al-*)")
if command -v nft >/dev/null && nft list table inet airlock >/dev/null 2>&1; then
  problems+=("the nftables table inet airlock")
fi
# The host's init may take a moment to reap the zombies of killed test runs.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  p=$(ps -eo uid= | awk '$1 >= 268435456' | wc -l)
  [ "$p" -eq 0 ] && break
  sleep 1
done
[ "$p" -eq 0 ] || problems+=("$p processes with a sandbox uid: $(ps -eo pid=,uid=,stat=,comm= | awk '$2 >= 268435456' | head -5 | tr '\n' ';')")
if [ "${#problems[@]}" -gt 0 ]; then
  printf 'check-host-clean: left behind: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "check-host-clean: no mounts, cgroups, lock files, scratch directories, sandbox networks, runsc or sandbox processes left"
