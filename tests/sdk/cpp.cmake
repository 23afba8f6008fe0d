# The C++ client SDK (sdk/cpp) against a real `airlock serve` started by the test (root).
add_executable(sdk_cpp_e2e_tests ${CMAKE_CURRENT_LIST_DIR}/cpp_sdk_test.cc)
target_link_libraries(sdk_cpp_e2e_tests PRIVATE airlock::client airlock_test_support GTest::gtest)
set_target_properties(sdk_cpp_e2e_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_compile_definitions(sdk_cpp_e2e_tests PRIVATE
  AIRLOCK_CLIENT_QUICKSTART="$<TARGET_FILE:airlock_client_quickstart>")
add_dependencies(sdk_cpp_e2e_tests airlock airlock_client_quickstart)
gtest_discover_tests(sdk_cpp_e2e_tests
  PROPERTIES LABELS sdk RESOURCE_LOCK airlock_host TIMEOUT 300
  DISCOVERY_TIMEOUT 60)

# The installed package (cmake --install, component client_sdk) builds a separate project.
add_test(NAME sdk_cpp_installed_package
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cpp_install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(sdk_cpp_installed_package PROPERTIES LABELS sdk TIMEOUT 300)
