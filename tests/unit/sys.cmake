# Kernel layer without root: cgroup drivers on a fake tree, seccomp through forked victims, doctor.
airlock_add_test(sys_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cgroup_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/seccomp_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/doctor_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/process_end_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/cloexec_test.cc
  LIBS airlock_core airlock_dep_seccomp)

# The agent's transfer helper (agent/transfer_helper.h), run as a program on archives built
# here: extraction rules, caps, and packing.
airlock_add_test(transfer_helper_tests LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/transfer_helper_test.cc
  LIBS archive)
add_dependencies(transfer_helper_tests airlock-agent)
