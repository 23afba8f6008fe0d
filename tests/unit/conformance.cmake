# The conformance suite's own bookkeeping: its gap lists and its policy injection.
airlock_add_test(conformance_unit_tests LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/conformance_gaps_test.cc)
