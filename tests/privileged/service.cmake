# The sandbox manager (supervisor/sandbox/) behind the API, driven in-process on real sandboxes: lifecycle,
# commands, files, code contexts, lifetimes, quotas and tenants. Needs root.
airlock_add_test(service_tests LABEL privileged
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/service_test.cc
  LIBS airlock_core)
add_dependencies(service_tests airlock-agent airlock_isolation_namespaces airlock_language_python
  airlock_language_node airlock_language_shell)

# Pre-started interpreters in the manager's pools, side by side with cold one-shot runs.
airlock_add_test(prestart_pool_tests LABEL privileged
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/prestart_pool_test.cc
  LIBS airlock_core)
add_dependencies(prestart_pool_tests airlock-agent airlock_isolation_namespaces
  airlock_language_python airlock_language_node airlock_language_shell)
