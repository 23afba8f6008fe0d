# Embeds a driver's source (session_driver.py, prestart_driver.js, ...) into a language plugin as
# a C++ raw string literal.
#
#   airlock_embed_driver(<target> <source> <symbol>)
#
# generates ${CMAKE_CURRENT_BINARY_DIR}/generated/<source name without extension>.h defining
# `inline constexpr char <symbol>[]`, regenerated whenever <source> changes, and adds its
# directory to <target>'s include path. Run as a script (cmake -P) it does the generation.

if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${IN}" content)
  set(delimiter "airlock_driver")
  string(FIND "${content}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${IN} contains ')${delimiter}\"', which would end the raw string")
  endif()
  file(WRITE "${OUT}.tmp"
    "// Generated from ${IN} by embed_driver.cmake; do not edit.\n"
    "#pragma once\n"
    "inline constexpr char ${SYMBOL}[] = R\"${delimiter}(${content})${delimiter}\";\n")
  # Only touches the header when the text changed, so unrelated builds recompile nothing.
  configure_file("${OUT}.tmp" "${OUT}" COPYONLY)
  file(REMOVE "${OUT}.tmp")
  return()
endif()

set(AIRLOCK_EMBED_DRIVER_SCRIPT ${CMAKE_CURRENT_LIST_FILE})

function(airlock_embed_driver target source symbol)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/generated)
  get_filename_component(name ${source} NAME_WE)
  set(header ${dir}/${name}.h)
  add_custom_command(
    OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_CURRENT_SOURCE_DIR}/${source} -DOUT=${header}
            -DSYMBOL=${symbol} -P ${AIRLOCK_EMBED_DRIVER_SCRIPT}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source} ${AIRLOCK_EMBED_DRIVER_SCRIPT}
    COMMENT "Embedding ${source} into ${target}"
    VERBATIM)
  target_sources(${target} PRIVATE ${header})
  target_include_directories(${target} PRIVATE ${dir})
endfunction()
