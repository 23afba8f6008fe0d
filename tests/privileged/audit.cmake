# eBPF audit and network policy on the real kernel (root): test cgroups, test network namespaces.
airlock_add_test(audit_privileged_tests LABEL privileged TIMEOUT 180
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/audit_test.cc
  LIBS airlock_core)
