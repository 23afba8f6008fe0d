target_sources(airlock_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} / loop_mount.cc)
