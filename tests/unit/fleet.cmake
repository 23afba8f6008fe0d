# A fleet behind HAProxy (supervisor/fleet, docs/deploy.md): the node list, the configuration
# made from it, what a node publishes for placement (Capacity, the agent-check listener).
airlock_add_test(fleet_unit_tests LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fleet_test.cc
  LIBS airlock_core)
