# The Python SDK (sdk/python): unit tests against a fake supervisor on a Unix socket (no root),
# and integration tests against a real `airlock serve` the test starts (root; without root they
# skip with the reason, and fail instead when AIRLOCK_TEST_REQUIRE_PRIVILEGED=1). Standard
# library only: the tests import the SDK from the source tree through PYTHONPATH.
find_package(Python3 3.11 COMPONENTS Interpreter)
set(AIRLOCK_PY_SDK_DIR ${PROJECT_SOURCE_DIR}/sdk/python)
set(AIRLOCK_PY_SDK_ENV "PYTHONPATH=${AIRLOCK_PY_SDK_DIR}/src:${AIRLOCK_PY_SDK_DIR}/tests"
  "PYTHONDONTWRITEBYTECODE=1")

if(NOT Python3_FOUND)
  add_test(NAME sdk_python.unit
    COMMAND sh -c "echo 'sdk/python: no Python 3.11+ interpreter was found when CMake configured' >&2; exit 1")
  set_tests_properties(sdk_python.unit PROPERTIES LABELS "sdk;unit")
  return()
endif()

add_test(NAME sdk_python.unit
  COMMAND ${Python3_EXECUTABLE} -W error::ResourceWarning -m unittest -v test_unit
  WORKING_DIRECTORY ${AIRLOCK_PY_SDK_DIR}/tests)
set_tests_properties(sdk_python.unit PROPERTIES
  LABELS "sdk;unit" TIMEOUT 120 ENVIRONMENT "${AIRLOCK_PY_SDK_ENV}")

# Starts its own supervisor and sandboxes and compares host-wide counts: never beside the other
# host-wide tests. All of it is skipped (ctest shows it skipped) when not root.
add_test(NAME sdk_python.integration
  COMMAND ${Python3_EXECUTABLE} -m unittest -v test_integration
  WORKING_DIRECTORY ${AIRLOCK_PY_SDK_DIR}/tests)
set_tests_properties(sdk_python.integration PROPERTIES
  LABELS sdk TIMEOUT 600 RESOURCE_LOCK airlock_host SKIP_REGULAR_EXPRESSION "OK \\(skipped="
  ENVIRONMENT "AIRLOCK_BIN=$<TARGET_FILE:airlock>;${AIRLOCK_PY_SDK_ENV}")
