# Kernel layer with real root: cgroups on this host's hierarchies, seccomp positive controls, doctor.
airlock_add_test(sys_privileged_tests LABEL privileged
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cgroup_real_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/seccomp_root_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/workspace_reown_test.cc
  LIBS airlock_core)
