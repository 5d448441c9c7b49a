# The layers of the product, as the build enforces them.
#
# espvpn_layer(TARGET DIRS dir... [PUBLIC lib...] [PRIVATE lib...] [OPEN_SUBFOLDERS])
# declares that the library TARGET is built from the folders DIRS (paths from the project
# root; a deeper folder declared by another layer belongs to that one) and links the given
# libraries. OPEN_SUBFOLDERS: the layer's sub-folders may include each other (protocols/:
# http/ and xml/ serve gp/ and anyconnect/); without it a folder sees only itself and the
# folders above it in its layer (datapath/esp/ not datapath/dtls/, session/ not session/gp/).
# The same declaration is the include rule: tools/layers/check_layers.py, run by every
# build before any layer compiles, fails the build when a file of src/, protocols/ or
# crypto/ includes a header of a layer its own does not link (PUBLIC for an include in a
# header), reaches into a sibling or child folder of its own layer (unless
# OPEN_SUBFOLDERS), or closes an include cycle,
# or when the links form a cycle. When TARGET does not exist (a part left out of this
# build, e.g. the NetworkManager plugin without libnm), only the rule is recorded.
function(espvpn_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "OPEN_SUBFOLDERS" "" "DIRS;PUBLIC;PRIVATE")
  if(NOT L_DIRS)
    message(FATAL_ERROR "espvpn_layer(${name}): no DIRS")
  endif()
  if(TARGET ${name})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})
    set_property(GLOBAL APPEND PROPERTY ESPVPN_LAYER_TARGETS ${name})
  endif()
  string(REPLACE ";" "," dirs "${L_DIRS}")
  string(REPLACE ";" "," public "${L_PUBLIC}")
  string(REPLACE ";" "," private "${L_PRIVATE}")
  set(flags "")
  if(L_OPEN_SUBFOLDERS)
    set(flags open_subfolders)
  endif()
  set_property(GLOBAL APPEND PROPERTY ESPVPN_LAYER_RULES "${name}|${dirs}|${public}|${private}|${flags}")
endfunction()

# After the last espvpn_layer(): writes the table and makes every layer depend on the check.
function(espvpn_check_layers)
  # /usr/bin first: it starts in 0.2 s, a pyenv shim on PATH takes seconds.
  find_program(ESPVPN_LAYERS_PYTHON3 NAMES python3 HINTS /usr/bin REQUIRED)
  get_property(rules GLOBAL PROPERTY ESPVPN_LAYER_RULES)
  list(SORT rules)
  string(REPLACE ";" "\n" text "${rules}")
  set(table ${PROJECT_BINARY_DIR}/layers.txt)
  # Rewritten only when it changes, so a re-configure does not re-run the check.
  file(CONFIGURE OUTPUT ${table} CONTENT "${text}\n" @ONLY)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/src/*.h ${PROJECT_SOURCE_DIR}/src/*.cpp
    ${PROJECT_SOURCE_DIR}/protocols/*.h ${PROJECT_SOURCE_DIR}/protocols/*.cpp
    ${PROJECT_SOURCE_DIR}/crypto/*.h ${PROJECT_SOURCE_DIR}/crypto/*.cpp
    ${PROJECT_SOURCE_DIR}/docs/*.md)
  set(script ${PROJECT_SOURCE_DIR}/tools/layers/check_layers.py)
  set(stamp ${PROJECT_BINARY_DIR}/layers.ok)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -E remove -f ${stamp}
    COMMAND ${ESPVPN_LAYERS_PYTHON3} ${script} --root ${PROJECT_SOURCE_DIR} --rules ${table} --stamp ${stamp}
    DEPENDS ${script} ${table} ${sources}
    COMMENT "Checking the layers' includes (tools/layers/check_layers.py)"
    VERBATIM)
  add_custom_target(espvpn_layers ALL DEPENDS ${stamp})
  get_property(targets GLOBAL PROPERTY ESPVPN_LAYER_TARGETS)
  foreach(t IN LISTS targets)
    add_dependencies(${t} espvpn_layers)
  endforeach()
  set(ESPVPN_LAYER_TABLE ${table} PARENT_SCOPE)
endfunction()
