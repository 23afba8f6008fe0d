# The airlock C++ client SDK (sdk/cpp):
#
#   find_package(airlock_client CONFIG REQUIRED)
#   target_link_libraries(my_service PRIVATE airlock::client)
#
# airlock::client is a static library; its headers (airlock/client/sandbox.h, ...) need C++23
# (std::expected) and nlohmann_json.
include(CMakeFindDependencyMacro)
find_dependency(nlohmann_json 3)
find_dependency(Threads)
include(${CMAKE_CURRENT_LIST_DIR}/airlock_clientTargets.cmake)
