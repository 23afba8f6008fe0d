# The supervisor service (supervisor/service/) driven in-process on real sandboxes: lifecycle,
# commands, files, code contexts, lifetimes, quotas and tenants. Needs root.
airlock_add_test(service_tests LABEL privileged
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/service_test.cc
  LIBS airlock_core)
add_dependencies(service_tests airlock-agent airlock_isolation_namespaces airlock_language_python
  airlock_language_node airlock_language_shell)
