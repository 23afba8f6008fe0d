#!/usr/bin/env bash
# The C++ SDK as a service's build uses it: `cmake --install` of the client_sdk component into a
# temporary prefix, then a separate CMake project that does find_package(airlock_client) and
# builds the README's quick start against it. Fails when the installed package is incomplete
# (a missing header, a target that links only inside this tree).
set -euo pipefail
build_dir="$1" source_dir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --component client_sdk --prefix "$work/prefix" >/dev/null
mkdir "$work/app"
cp "$source_dir/sdk/cpp/examples/quickstart.cc" "$work/app/"
cat >"$work/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(airlock_client_consumer CXX)
find_package(airlock_client CONFIG REQUIRED)
add_executable(app quickstart.cc)
target_link_libraries(app PRIVATE airlock::client)
CMAKE
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
test -x "$work/app/build/app"
echo "the installed airlock::client package builds the quick start"
