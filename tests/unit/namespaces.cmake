# The namespaces backend's lookups beneath the new root (plugins/isolation/namespaces/beneath.h):
# header-only, so tested here without root and without loading the plugin.
airlock_add_test(namespaces_unit_tests LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/namespaces_beneath_test.cc
  LIBS airlock_common)
target_include_directories(namespaces_unit_tests PRIVATE
  ${CMAKE_SOURCE_DIR}/plugins/isolation/namespaces)
