# The client of `airlock serve` (supervisor/client, the sandbox/exec/code/files commands),
# tested against a fake HTTP server on a temporary Unix socket.
add_library(airlock_client_fake_server STATIC ${CMAKE_CURRENT_LIST_DIR}/client_fake_server.cc)
target_link_libraries(airlock_client_fake_server PUBLIC airlock_test_support
  nlohmann_json::nlohmann_json PRIVATE Boost::headers Threads::Threads)
airlock_add_test(client_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/client_http_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/client_cli_test.cc
  LIBS airlock_client airlock_client_fake_server airlock_core)
