# Ending a sandbox's PID 1 for good at teardown: SIGKILL by pidfd, a bounded wait, the reap.
target_sources(airlock_core PRIVATE ${CMAKE_CURRENT_LIST_DIR}/process_end.cc)
