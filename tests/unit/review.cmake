# The review chain (supervisor/review/): every built-in reviewer, the chain, the verdict cache,
# the approval queue, the webhook against a loopback server, review plugins, and the review
# section of the policy. No root needed: python_ast runs on a fake sandbox runner here and on
# real sandboxes in tests/privileged/review_python_ast_test.cc.
airlock_add_test(review_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/review_reviewers_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/review_external_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/review_chain_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/review_approval_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/review_policy_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/review_plugin_abi_test.cc
  LIBS airlock_core)
add_dependencies(review_unit_tests airlock_review_example)

# bench/review_bench.cc: what the chain adds per execution (see bench/README.md).
add_executable(review_bench ${CMAKE_SOURCE_DIR}/bench/review_bench.cc)
target_link_libraries(review_bench PRIVATE airlock_core)
set_target_properties(review_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
