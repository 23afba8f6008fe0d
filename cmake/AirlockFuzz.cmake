# The fuzz tree's compiler settings (-DAIRLOCK_FUZZ=ON; the targets are in fuzz/CMakeLists.txt).
#
# libFuzzer is part of Clang, so a fuzz tree must be configured with CC=clang CXX=clang++.
# Everything the tree builds is code a fuzzer links: all of it is instrumented for coverage
# (fuzzer-no-link) and built with ASan and UBSan, and UBSan stops at its first report so that
# libFuzzer records it as a crash with its input.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "AIRLOCK_FUZZ needs Clang (libFuzzer ships with it): configure with "
                      "CC=clang CXX=clang++, as scripts/fuzz.sh does")
endif()
set(AIRLOCK_FUZZ_SANITIZERS -fsanitize=fuzzer-no-link,address,undefined
                            -fno-sanitize-recover=undefined)
add_compile_options(${AIRLOCK_FUZZ_SANITIZERS} -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)

# Clang before 16 cannot compile libstdc++ 12's <expected> (fuzz/compat/expected says why): use
# the stand-in then, and only then.
include(CheckCXXSourceCompiles)
check_cxx_source_compiles([[
  #include <expected>
  #include <string>
  std::expected<std::string, std::string> f() { return std::unexpected(std::string("e")); }
  int main() { return f().has_value() ? 1 : 0; }
]] AIRLOCK_HAVE_STD_EXPECTED)
if(NOT AIRLOCK_HAVE_STD_EXPECTED)
  message(STATUS "airlock fuzz: this compiler cannot use <expected>; using fuzz/compat/expected")
  include_directories(BEFORE SYSTEM ${CMAKE_SOURCE_DIR}/fuzz/compat)
endif()
