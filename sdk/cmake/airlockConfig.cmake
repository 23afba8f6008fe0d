# airlock's CMake package: the plugin SDK for plugins built outside the airlock tree.
#
#   find_package(airlock CONFIG REQUIRED)
#   add_library(my_plugin MODULE my_plugin.cc)
#   target_link_libraries(my_plugin PRIVATE airlock::sdk)
#
# airlock::sdk carries the include directory (airlock/plugin_abi_v1.h, airlock/plugin.hpp) and
# Boost's headers, which BOOST_DLL_ALIAS needs. Nothing is linked.
include(CMakeFindDependencyMacro)
find_dependency(Boost 1.74)
include(${CMAKE_CURRENT_LIST_DIR}/airlockTargets.cmake)
