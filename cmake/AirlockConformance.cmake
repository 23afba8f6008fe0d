# The conformance suite: the test binaries that describe what a sandbox is (posture, limits,
# files, sessions, network, audit, review, cleanup, the hostile cases) registered once more for
# each isolation backend beyond namespaces, as "<backend>:<Suite>.<Case>" with the label
# <backend>-<label> (so -L hostile still selects them) and AIRLOCK_TEST_ISOLATION=<backend> in the environment (tests/support: every
# sandbox such a test makes then uses that backend). scripts/test.sh picks the backends with
# AIRLOCK_TEST_BACKENDS.
#
# A case a backend cannot support is listed in tests/conformance/<backend>-gaps.txt with the
# reason ("Suite.Case  reason"). ctest shows it as "Not Run (Disabled)", scripts/test.sh prints
# the list with the reasons, and tests/unit/conformance_gaps_test.cc fails on a listed case that
# no longer exists.
set(AIRLOCK_CONFORMANCE_BACKENDS gvisor microvm)

# The ctest script that disables one backend's listed gaps.
function(_airlock_gaps_script backend out_var)
  set(list ${CMAKE_SOURCE_DIR}/tests/conformance/${backend}-gaps.txt)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${list})
  file(STRINGS ${list} lines)
  set(script "# Generated from tests/conformance/${backend}-gaps.txt\n")
  foreach(line ${lines})
    if(line MATCHES "^([A-Za-z0-9_]+\\.[A-Za-z0-9_]+)[ \t]")
      # A name that is not a test here is ignored by ctest: each directory includes all.
      string(APPEND script
        "set_tests_properties(\"${backend}:${CMAKE_MATCH_1}\" PROPERTIES DISABLED TRUE)\n")
    endif()
  endforeach()
  set(out ${CMAKE_BINARY_DIR}/tests/conformance-${backend}-gaps.cmake)
  file(WRITE ${out} "${script}")
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

function(airlock_conformance target)
  # FILTER: a gtest filter, for a binary whose other cases test the host alone (no sandbox).
  cmake_parse_arguments(C "" "LABEL;TIMEOUT;FILTER" "PROPERTIES" ${ARGN})
  if(NOT C_TIMEOUT)
    set(C_TIMEOUT 300)
  endif()
  set(filter)
  if(C_FILTER)
    set(filter TEST_FILTER ${C_FILTER})
  endif()
  foreach(backend ${AIRLOCK_CONFORMANCE_BACKENDS})
    gtest_discover_tests(${target}
      TEST_PREFIX "${backend}:"
      TEST_LIST ${target}_${backend}_tests
      ${filter}
      PROPERTIES LABELS ${backend}-${C_LABEL} TIMEOUT ${C_TIMEOUT}
        ENVIRONMENT "AIRLOCK_TEST_ISOLATION=${backend}" RESOURCE_LOCK airlock_host ${C_PROPERTIES}
      DISCOVERY_TIMEOUT 60)
    # After the discovered tests' own include file: ctest includes them in this order.
    _airlock_gaps_script(${backend} gaps)
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${gaps})
  endforeach()
endfunction()
