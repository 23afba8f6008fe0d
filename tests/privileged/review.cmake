# The python_ast reviewer on real throwaway sandboxes (sandbox::StandaloneReviewRunner): what it denies,
# what it allows, and hostile input that must not crash or hang it. Needs root.
airlock_add_test(review_privileged_tests LABEL privileged TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/review_python_ast_test.cc
  LIBS airlock_core)
add_dependencies(review_privileged_tests airlock-agent airlock_isolation_namespaces
  airlock_language_python)
