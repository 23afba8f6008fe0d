#!/usr/bin/env bash
# Fails when a C/C++ source differs from .clang-format (Google base, 100 columns).
# The plugin ABI header is left out on purpose: it is frozen byte for byte per ABI version
# (tests/unit/abi_hashes.txt), so reformatting it would read as an ABI change.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.hpp' '*.c' | grep -v -e '^tests/data/' \
  -e '^sdk/include/airlock/plugin_abi_v1.h$')
clang-format --dry-run --Werror "${files[@]}"
echo "check-format: ${#files[@]} files match .clang-format"
# toml++ only through common/include/airlock/toml.h, which fixes Debian 12's toml++ as it compiles.
if direct=$(git grep -n -e '#include <toml++/' -- '*.cc' '*.h' ':!common/include/airlock/toml.h'); then
  echo "check-format: include \"airlock/toml.h\", not toml++ directly:" >&2
  echo "$direct" >&2
  exit 1
fi
