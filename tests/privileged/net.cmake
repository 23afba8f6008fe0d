# Sandbox networks (supervisor/net, docs/network.md) on the real kernel (root): veth pairs into
# test network namespaces, a fake internet in TEST-NET-2 behind a test veth, airlock's nft table
# under a test name. No packet leaves the machine.
# The test links libnftables itself (the supervisor dlopen()s it) to check the table independently.
pkg_check_modules(LIBNFTABLES_FOR_TESTS REQUIRED IMPORTED_TARGET libnftables)
airlock_add_test(net_privileged_tests LABEL privileged TIMEOUT 180
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/net_test.cc
  LIBS airlock_core PkgConfig::LIBNFTABLES_FOR_TESTS)
# The end-to-end cases run `airlock run` with a Python probe in the sandbox.
add_dependencies(net_privileged_tests airlock airlock-agent airlock_isolation_namespaces
  airlock_language_python)
# The egress cases make real sandboxes: on every backend. The rest test the host's side alone.
airlock_conformance(net_privileged_tests LABEL privileged TIMEOUT 180 FILTER "SandboxEgressTest.*"
  PROPERTIES RUN_SERIAL TRUE)
