# The HTTP API (supervisor/api): decoding, routing and the server against a fake service.
set(AIRLOCK_API_TEST_EXTRA "")
if(NOT EXISTS ${CMAKE_SOURCE_DIR}/supervisor/service/CMakeLists.txt)
  # Until supervisor/service/ builds, the error-code table it defines comes from a stub.
  list(APPEND AIRLOCK_API_TEST_EXTRA ${CMAKE_CURRENT_LIST_DIR}/api_service_errors_stub.cc)
endif()
airlock_add_test(api_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/api_decoding_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/api_server_test.cc
    ${AIRLOCK_API_TEST_EXTRA}
  LIBS airlock_core)
