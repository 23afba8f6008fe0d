# The language session drivers, run as host processes through the commands their plugins build.
airlock_add_test(session_driver_tests LABEL plugin
  SOURCES session_driver_test.cc
  LIBS airlock_plugin_loader nlohmann_json::nlohmann_json)
add_dependencies(session_driver_tests
  airlock_language_python airlock_language_node airlock_language_shell)
target_compile_definitions(session_driver_tests PRIVATE AIRLOCK_FIXTURE_DIR="${AIRLOCK_FIXTURE_DIR}")
