airlock_add_test(supervisor_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/run_result_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/sandbox_paths_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/prestart_choice_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/environment_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/id_range_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_connection_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/transfer_output_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/cli_text_test.cc
  LIBS airlock_core)
