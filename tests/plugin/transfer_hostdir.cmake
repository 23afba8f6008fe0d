# airlock.transfer.hostdir, loaded from the build tree through the real loader and driven
# through its C ABI against real directories; the tar it streams in is decoded with libarchive.
# No root needed.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HOSTDIR_TEST_LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
airlock_add_test(transfer_hostdir_tests LABEL plugin
  SOURCES transfer_hostdir_test.cc
  LIBS airlock_plugin_loader PkgConfig::HOSTDIR_TEST_LIBARCHIVE)
add_dependencies(transfer_hostdir_tests airlock_transfer_hostdir)
target_compile_definitions(transfer_hostdir_tests PRIVATE
  AIRLOCK_PLUGIN_BUILD_DIR="${AIRLOCK_PLUGIN_OUTPUT_DIR}")
