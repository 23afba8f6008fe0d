# The Python SDK (sdk/python): unit tests against a fake supervisor on a Unix socket (no root),
# and integration tests against a real `airlock serve` the test starts (root; without root they
# skip with the reason, and fail instead when AIRLOCK_TEST_REQUIRE_PRIVILEGED=1). The tests import
# the SDK from the source tree through PYTHONPATH.
#
# The SDK needs httpx, which the host has as Debian's python3-httpx (scripts/install-deps.sh), so
# the tests run with Debian's interpreter, /usr/bin/python3, not whatever python3 comes first on
# PATH (a pyenv or venv interpreter would not see the Debian package).
# AIRLOCK_SDK_PYTHON names another interpreter that has httpx (>= 0.23).
set(AIRLOCK_SDK_PYTHON "/usr/bin/python3" CACHE FILEPATH
  "Python 3.11+ with httpx that runs the Python SDK's tests")
set(AIRLOCK_PY_SDK_DIR ${PROJECT_SOURCE_DIR}/sdk/python)
set(AIRLOCK_PY_SDK_ENV "PYTHONPATH=${AIRLOCK_PY_SDK_DIR}/src:${AIRLOCK_PY_SDK_DIR}/tests"
  "PYTHONDONTWRITEBYTECODE=1")

execute_process(
  COMMAND ${AIRLOCK_SDK_PYTHON} -c
    "import sys, httpx; sys.exit(0 if sys.version_info >= (3, 11) else 1)"
  RESULT_VARIABLE _airlock_sdk_python_ok OUTPUT_QUIET ERROR_QUIET)
if(NOT _airlock_sdk_python_ok EQUAL 0)
  foreach(name sdk_python.unit sdk_python.integration)
    add_test(NAME ${name}
      COMMAND sh -c "echo 'sdk/python: ${AIRLOCK_SDK_PYTHON} is not Python 3.11+ with httpx (apt-get install python3-httpx, or set AIRLOCK_SDK_PYTHON)' >&2; exit 1")
    set_tests_properties(${name} PROPERTIES LABELS "sdk;unit")
  endforeach()
  return()
endif()

add_test(NAME sdk_python.unit
  COMMAND ${AIRLOCK_SDK_PYTHON} -W error::ResourceWarning -m unittest -v test_unit test_contract test_e2b_unit
  WORKING_DIRECTORY ${AIRLOCK_PY_SDK_DIR}/tests)
set_tests_properties(sdk_python.unit PROPERTIES
  LABELS "sdk;unit" TIMEOUT 120 ENVIRONMENT "${AIRLOCK_PY_SDK_ENV}")

# Starts its own supervisor and sandboxes and compares host-wide counts: never beside the other
# host-wide tests. All of it is skipped (ctest shows it skipped) when not root. test_e2b runs
# E2B's documented examples through airlock.e2b on the same kind of supervisor.
add_test(NAME sdk_python.integration
  COMMAND ${AIRLOCK_SDK_PYTHON} -m unittest -v test_integration test_e2b
  WORKING_DIRECTORY ${AIRLOCK_PY_SDK_DIR}/tests)
set_tests_properties(sdk_python.integration PROPERTIES
  LABELS sdk TIMEOUT 600 RESOURCE_LOCK airlock_host SKIP_REGULAR_EXPRESSION "OK \\(skipped="
  ENVIRONMENT "AIRLOCK_BIN=$<TARGET_FILE:airlock>;${AIRLOCK_PY_SDK_ENV}")
