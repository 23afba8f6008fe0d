# The namespaces isolation plugin, loaded through Boost.DLL and driven with a static probe that
# stands in for airlock-agent and reports its view of the sandbox on fd 3.
add_executable(namespaces_probe ${CMAKE_CURRENT_SOURCE_DIR}/namespaces_probe.c)
target_link_options(namespaces_probe PRIVATE -static)
set_target_properties(namespaces_probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

airlock_add_test(namespaces_tests LABEL privileged
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/namespaces_test.cc
  LIBS airlock::sdk airlock_common Boost::filesystem ${CMAKE_DL_LIBS})
target_compile_definitions(namespaces_tests PRIVATE
  AIRLOCK_NAMESPACES_PROBE="$<TARGET_FILE:namespaces_probe>"
  AIRLOCK_NAMESPACES_PLUGIN="$<TARGET_FILE:airlock_isolation_namespaces>")
add_dependencies(namespaces_tests namespaces_probe airlock_isolation_namespaces)
