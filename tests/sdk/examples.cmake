# examples/*.py, the five SDK use cases, run end to end as users run them against a real
# `airlock serve` with policy/examples/data-science.toml (root; skipped with the reason
# otherwise). Needs python3-pandas, python3-matplotlib and python3-reportlab on the host: the
# sandbox sees the host's /usr. The SDK needs httpx: run with the interpreter python.cmake checked.
find_package(Python3 3.11 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME sdk_examples
    COMMAND ${AIRLOCK_SDK_PYTHON} -m unittest -v test_examples
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/python/tests)
  set_tests_properties(sdk_examples PROPERTIES
    LABELS sdk TIMEOUT 900 RESOURCE_LOCK airlock_host SKIP_REGULAR_EXPRESSION "OK \\(skipped="
    ENVIRONMENT "AIRLOCK_BIN=$<TARGET_FILE:airlock>;PYTHONPATH=${PROJECT_SOURCE_DIR}/sdk/python/src:${PROJECT_SOURCE_DIR}/sdk/python/tests;PYTHONDONTWRITEBYTECODE=1")
endif()
