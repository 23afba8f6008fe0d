# airlock_add_test(<target> LABEL <unit|plugin|privileged|e2e|hostile> SOURCES ... [LIBS ...])
# One GoogleTest executable; every TEST becomes a ctest test carrying the label, so
# `ctest -L unit` runs only what needs no root.
find_package(GTest REQUIRED)
include(GoogleTest)
function(airlock_add_test target)
  cmake_parse_arguments(T "" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${target} ${T_SOURCES})
  target_link_libraries(${target} PRIVATE GTest::gtest GTest::gmock airlock_test_support ${T_LIBS})
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # Tests that create sandboxes compare host-wide counts (mounts, cgroups, sandbox processes)
  # before and after, so they must not overlap each other; unit and plugin tests run beside them.
  set(lock "")
  if(T_LABEL MATCHES "^(privileged|e2e|hostile)$")
    set(lock RESOURCE_LOCK airlock_host)
  elseif(T_LABEL STREQUAL "load")
    set(lock RUN_SERIAL TRUE)  # they measure latency: nothing else runs beside them
  endif()
  gtest_discover_tests(${target}
    PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT} ${lock}
    DISCOVERY_TIMEOUT 60)
endfunction()
