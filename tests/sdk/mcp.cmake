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
