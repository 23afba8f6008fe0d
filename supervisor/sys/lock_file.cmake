#flock() ed files shared by airlock processes(network slots, the pinned audit engine).
target_sources(airlock_core PRIVATE ${CMAKE_CURRENT_LIST_DIR} / lock_file.cc)
