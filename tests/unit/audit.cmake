# eBPF audit without root: rule parsing and compilation, event decoding, summaries, the audit log
# and reading it back; the audit trail's lifecycle records and webhooks; the same rules rendered for a link's nftables filter.
airlock_add_test(audit_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/audit_net_rules_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/audit_events_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/audit_log_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/audit_log_reader_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/audit_lifecycle_records_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/audit_webhook_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/net_link_filter_test.cc
  LIBS airlock_core)
