# The gVisor backend's pure parts, without runsc: decoding its runtime monitoring.
airlock_add_test(gvisor_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/gvisor_monitor_test.cc
    ${CMAKE_SOURCE_DIR}/plugins/isolation/gvisor/monitor.cc
  LIBS airlock::sdk airlock_common nlohmann_json::nlohmann_json)
target_include_directories(gvisor_unit_tests PRIVATE ${CMAKE_SOURCE_DIR}/plugins/isolation/gvisor)
