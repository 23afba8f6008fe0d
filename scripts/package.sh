#!/usr/bin/env bash
# Builds the Debian package build-deb/airlock_<version>_amd64.deb: a build tree of its own,
# installed under /usr with /etc/airlock and /var/lib/airlock (build/ installs under /usr/local,
# and its binary looks for its default policy there), the runtime targets only (no tests), then
# CPack's DEB generator (packaging/CMakeLists.txt). Prints the package's path on its last line.
# Extra arguments go to cmake at configure time. Needs dpkg-dev (dpkg-shlibdeps), part of
# build-essential.
#
# AIRLOCK_PACKAGE_TREE=build packs an existing tree instead (CI: build/ configured once with
# -DCMAKE_INSTALL_PREFIX=/usr -DAIRLOCK_PACKAGE_DEB=ON, so the package costs no second compile).
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${AIRLOCK_PACKAGE_TREE:-build-deb}"
if [ -f "$tree/CMakeCache.txt" ] && ! grep -qx 'CMAKE_INSTALL_PREFIX:PATH=/usr' "$tree/CMakeCache.txt"; then
  echo "package: $tree is configured for another prefix than /usr; its binary would look for" \
    "its policy there (configure it with -DCMAKE_INSTALL_PREFIX=/usr -DAIRLOCK_PACKAGE_DEB=ON)" >&2
  exit 1
fi
if [ ! -f "$tree/build.ninja" ]; then
  cmake -S . -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
    -DAIRLOCK_BUILD_TESTS=OFF -DAIRLOCK_PACKAGE_DEB=ON "$@" >/dev/null
fi
cmake --build "$tree" --target airlock_runtime -j "$(nproc)"
(cd "$tree" && cpack -G DEB >/dev/null)
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$tree/CMakeCache.txt")"
deb="$PWD/$tree/airlock_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || { echo "package: cpack made no $deb" >&2; exit 1; }
echo "$deb"
