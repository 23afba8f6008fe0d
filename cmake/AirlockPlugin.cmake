# airlock_add_plugin(<target> KIND <isolation|language|transfer|review> NAME <short> SOURCES ...)
# Builds a plugin as a MODULE named <kind>-<name>.so in the plugins directory of the build tree
# (and of the install tree), linked against the SDK only.
function(airlock_add_plugin target)
  cmake_parse_arguments(P "" "KIND;NAME" "SOURCES;LIBS" ${ARGN})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE airlock::sdk ${P_LIBS})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "${P_KIND}-${P_NAME}"
    LIBRARY_OUTPUT_DIRECTORY ${AIRLOCK_PLUGIN_OUTPUT_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,-z,defs)
  # Self-contained C++ runtime: the supervisor links libstdc++ statically, so a plugin needing
  # the shared one would make every run load and relocate it (~1 ms). Only C crosses the ABI.
  # --exclude-libs keeps that copy's ~800 symbols out of the plugin's dynamic symbol table:
  # they bind inside the plugin at link time, where dlopen() would look each one up by name.
  if(AIRLOCK_STATIC_DEPS)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL)
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${AIRLOCK_PLUGIN_INSTALL_DIR})
  # Collected for the airlock_runtime target (packaging/): what scripts/setup.sh and the .deb build.
  set_property(GLOBAL APPEND PROPERTY AIRLOCK_PLUGIN_TARGETS ${target})
endfunction()
