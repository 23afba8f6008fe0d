# Kernel layer without root: cgroup drivers on a fake tree, seccomp through forked victims, doctor.
airlock_add_test(sys_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cgroup_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/seccomp_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/doctor_test.cc
  LIBS airlock_core airlock_dep_seccomp)
