# The package proxy (supervisor/packages): rules and versions, page and packument rewriting as
# pure functions, and the proxy end to end in process against a fake upstream on loopback.
airlock_add_test(packages_unit_tests LABEL unit TIMEOUT 60
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/packages_rules_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/packages_rewrite_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/packages_proxy_test.cc
  LIBS airlock_packages nlohmann_json::nlohmann_json airlock_dep_crypto)  # sha512 for integrity
