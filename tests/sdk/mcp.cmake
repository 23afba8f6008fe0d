# `airlock mcp` end to end: the official MCP TypeScript SDK client (tests/mcp, node:test) spawns
# `airlock mcp` against a supervisor the test starts. Needs root and `npm ci --prefix tests/mcp`.
find_program(AIRLOCK_NODE node)
if(AIRLOCK_NODE)
  add_test(NAME mcp_typescript_client_e2e
    COMMAND ${AIRLOCK_NODE} --test ${CMAKE_SOURCE_DIR}/tests/mcp/mcp.test.mjs
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/mcp)
else()
  add_test(NAME mcp_typescript_client_e2e
    COMMAND sh -c "echo 'node not found: install Node.js 18+ and run npm ci --prefix tests/mcp' >&2; exit 1")
endif()
set_tests_properties(mcp_typescript_client_e2e PROPERTIES
  LABELS sdk RESOURCE_LOCK airlock_host TIMEOUT 300
  ENVIRONMENT AIRLOCK_BIN=$<TARGET_FILE:airlock>)

# MCP over Streamable HTTP: the same client's StreamableHTTPClientTransport against /mcp of an
# `airlock serve` the test starts on loopback TCP with a tenant token.
if(AIRLOCK_NODE)
  add_test(NAME mcp_http_typescript_client_e2e
    COMMAND ${AIRLOCK_NODE} --test ${CMAKE_SOURCE_DIR}/tests/mcp/mcp_http.test.mjs
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/mcp)
else()
  add_test(NAME mcp_http_typescript_client_e2e
    COMMAND sh -c "echo 'node not found: install Node.js 18+ and run npm ci --prefix tests/mcp' >&2; exit 1")
endif()
set_tests_properties(mcp_http_typescript_client_e2e PROPERTIES
  LABELS sdk RESOURCE_LOCK airlock_host TIMEOUT 120
  ENVIRONMENT AIRLOCK_BIN=$<TARGET_FILE:airlock>)

# Remote access over TLS (tests/remote): a CA and certificates made with the openssl CLI, and a
# supervisor on 127.0.0.2, which the rule treats as non-loopback, so the port never leaves the
# host. Needs root; without it the tests skip.
find_package(Python3 3.11 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME remote_tls_e2e
    COMMAND ${Python3_EXECUTABLE} -m unittest -v test_tls_remote
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/remote)
else()
  add_test(NAME remote_tls_e2e
    COMMAND sh -c "echo 'tests/remote: no Python 3.11+ interpreter was found' >&2; exit 1")
endif()
set_tests_properties(remote_tls_e2e PROPERTIES
  LABELS sdk RESOURCE_LOCK airlock_host TIMEOUT 120 SKIP_REGULAR_EXPRESSION "OK \\(skipped="
  ENVIRONMENT "AIRLOCK_BIN=$<TARGET_FILE:airlock>;PYTHONDONTWRITEBYTECODE=1")
