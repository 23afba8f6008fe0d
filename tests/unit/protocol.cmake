# The agent channel codec: round trips, every validation failure, FrameReader, mutation fuzzing.
airlock_add_test(protocol_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/protocol_codec_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/protocol_reader_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/protocol_fuzz_test.cc
  LIBS airlock_protocol)
