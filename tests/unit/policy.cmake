# The policy library: fixtures, reference.toml drift, validate/relaxations, server and tenants,
# mutated inputs, the network rule grammar, and that it includes nothing of the supervisor.
airlock_add_test(policy_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/policy_test_util.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_parse_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_reference_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_validate_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_serve_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_transfer_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_packages_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_fuzz_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_net_rule_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_layering_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/policy_installed_test.cc
  LIBS airlock_policy airlock_dep_toml)
target_compile_definitions(policy_tests PRIVATE
  AIRLOCK_POLICY_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data/policy"
  AIRLOCK_POLICY_EXAMPLES="${CMAKE_SOURCE_DIR}/policy/examples"
  AIRLOCK_POLICY_DOCS="${CMAKE_SOURCE_DIR}/docs/policy.md")
