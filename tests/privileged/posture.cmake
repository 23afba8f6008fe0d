# posture_tests: the sandbox posture of docs/security-tests.md read from the host through /proc/<pid>/ of a live
# sandboxed process. Needs root and a working `airlock run`. RUN_SERIAL: the cases compare the
# host's airlock mounts, cgroups and sandbox processes before and after, which concurrently
# running sandbox tests would disturb.
add_executable(posture_tests ${CMAKE_CURRENT_SOURCE_DIR}/posture_test.cc)
target_link_libraries(posture_tests PRIVATE GTest::gtest airlock_test_support)
set_target_properties(posture_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
gtest_discover_tests(posture_tests
  PROPERTIES LABELS privileged TIMEOUT 120 RUN_SERIAL TRUE
  DISCOVERY_TIMEOUT 60)
airlock_conformance(posture_tests LABEL privileged TIMEOUT 120 PROPERTIES RUN_SERIAL TRUE)
