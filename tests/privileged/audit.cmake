# eBPF audit and network policy on the real kernel (root): test cgroups, test network namespaces.
airlock_add_test(audit_privileged_tests LABEL privileged TIMEOUT 180
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/audit_test.cc
  LIBS airlock_core)
# The audit wired into real sandboxes: `airlock run --json`, the service in-process, the [audit]
# log, runtime network rules, failing closed (root, loopback and refused connects only).
airlock_add_test(audit_sandbox_tests LABEL privileged TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/audit_sandbox_test.cc
  LIBS airlock_core)
add_dependencies(audit_sandbox_tests airlock airlock-agent airlock_isolation_namespaces
  airlock_language_python airlock_language_shell)
# What a sandbox's audit records, on every backend (AuditSandbox.* tests the engine alone).
airlock_conformance(audit_sandbox_tests LABEL privileged TIMEOUT 300
  FILTER "AuditRun.*:AuditService.*:AuditServe.*" PROPERTIES RUN_SERIAL TRUE)
