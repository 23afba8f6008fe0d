# `airlock mcp` and `airlock tools`: the tool catalog, the JSON-RPC/MCP layer (framing, errors,
# hostile input) and the tools against the fake supervisor of the client tests. No root.
airlock_add_test(mcp_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/mcp_catalog_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/mcp_protocol_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/mcp_tools_test.cc
  LIBS airlock_core airlock_client_fake_server)
add_dependencies(mcp_unit_tests airlock)  # ToolsCommandPrintsEachFormat runs the binary
