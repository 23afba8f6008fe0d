# The C++ client SDK (sdk/cpp): Sandbox, Commands, Files and typed errors against the fake
# HTTP server of the client tests (client.cmake), no root needed; and its types field by field
# against supervisor/api/openapi.json (sdk_cpp_contract_test.cc).
airlock_add_test(sdk_cpp_unit_tests LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/sdk_cpp_test.cc ${CMAKE_CURRENT_LIST_DIR}/sdk_cpp_contract_test.cc
  LIBS airlock::client airlock_client_fake_server)
