# microvm_tests: the microvm backend as the host sees it (its own kernel, QEMU confined, bad
# inputs). The sandbox seen from inside is the conformance suite's (cmake/AirlockConformance.cmake).
airlock_add_test(microvm_tests LABEL privileged TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/microvm_test.cc)
add_dependencies(microvm_tests airlock airlock-agent airlock-vm-init airlock_isolation_microvm
  airlock_language_shell)
