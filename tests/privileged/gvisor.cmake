# gvisor_tests: the gvisor backend as the host sees it (host processes, cgroup, cleanup, bad
# runsc). The sandbox seen from inside is the conformance suite's (cmake/AirlockConformance.cmake).
airlock_add_test(gvisor_tests LABEL privileged TIMEOUT 180
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gvisor_test.cc
  LIBS nlohmann_json::nlohmann_json)
add_dependencies(gvisor_tests airlock airlock-agent airlock_isolation_gvisor airlock_language_shell)
