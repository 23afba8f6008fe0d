# Reviewers that run a program, on real throwaway sandboxes (sandbox::StandaloneReviewRunner, and
# a serving manager's pre-started checkers): python_ast's denials, allowances and hostile input
# that must not crash or hang it; the operator's `command` program, never on the host. Root.
airlock_add_test(review_privileged_tests LABEL privileged TIMEOUT 300
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/review_python_ast_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/review_command_test.cc
  LIBS airlock_core)
add_dependencies(review_privileged_tests airlock-agent airlock_isolation_namespaces
  airlock_language_python)
