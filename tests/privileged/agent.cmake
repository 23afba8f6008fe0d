# airlock-agent driven over a socketpair on fd 3, as the namespaces backend does. Most cases run
# without root (uid/gid = the test's own); the uid-drop, Landlock-as-another-user and /proc/<agent>
# cases call AIRLOCK_REQUIRE_ROOT. The supervisor's agent handshake and connection are compiled
# in directly (they need only the protocol library), so these tests do not link the whole supervisor.
airlock_add_test(agent_tests LABEL privileged
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/agent_harness.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_exec_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_files_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_fileops_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_session_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_reattach_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_confinement_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_pid1_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_handshake_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_ports_test.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/agent/handshake.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/agent/connection.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/agent/program.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/agent/file_ops.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/agent/port_stream.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/paths.cc
    ${CMAKE_SOURCE_DIR}/supervisor/sandbox/service.cc
  LIBS airlock_protocol nlohmann_json::nlohmann_json)
add_dependencies(agent_tests airlock-agent)
target_include_directories(agent_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit ${CMAKE_SOURCE_DIR})
