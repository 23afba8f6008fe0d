# airlock.transfer.http: its URL, pattern, address and rule logic linked directly (no root), and
# the plugin through the loader against a real server in a network namespace (root).
find_package(OpenSSL REQUIRED)  # the test hashes what crossed

airlock_add_test(transfer_http_unit_tests LABEL plugin
  SOURCES transfer_http_unit_test.cc
  LIBS airlock_transfer_http_core)

airlock_add_test(transfer_http_tests LABEL privileged TIMEOUT 60
  SOURCES transfer_http_test.cc
  LIBS airlock_plugin_loader nlohmann_json::nlohmann_json OpenSSL::Crypto)
add_dependencies(transfer_http_tests airlock_transfer_http)
target_compile_definitions(transfer_http_tests PRIVATE
  AIRLOCK_PLUGIN_BUILD_DIR="${AIRLOCK_PLUGIN_OUTPUT_DIR}"
  AIRLOCK_TRANSFER_HTTP_SERVER="${PROJECT_SOURCE_DIR}/tests/support/transfer_http_server.py")
