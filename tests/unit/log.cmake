# The operational log's formatter, level filter and configuration (supervisor/log/).
airlock_add_test(log_unit_tests LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/log_format_test.cc
  LIBS airlock_log nlohmann_json::nlohmann_json Threads::Threads)
