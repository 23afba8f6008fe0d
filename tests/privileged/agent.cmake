# airlock-agent driven over a socketpair on fd 3, as the namespaces backend does. Most cases run
# without root (uid/gid = the test's own); the uid-drop and Landlock-as-another-user cases call
# AIRLOCK_REQUIRE_ROOT.
airlock_add_test(agent_tests LABEL privileged
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/agent_harness.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_exec_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_files_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_confinement_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_pid1_test.cc
  LIBS airlock_protocol)
add_dependencies(agent_tests airlock-agent)
target_include_directories(agent_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit)
