# The HTTP API (supervisor/api): decoding, routing and the server against a fake service.
airlock_add_test(api_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/api_admission_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/api_decoding_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/api_server_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/api_run_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/metrics_exposition_test.cc
  LIBS airlock_core)

# The server under load and abuse: alone on the machine (RUN_SERIAL), since they measure latency.
airlock_add_test(api_load_tests LABEL load TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/api_load_test.cc
  LIBS airlock_core)
