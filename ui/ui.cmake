# ui.cmake - the web UI, embedded into the agent (included by CMakeLists.txt).
#
# ui/src/* (our HTML, JavaScript and CSS), ui/dashboards.json (the dashboards'
# one source) and uPlot's dist files (from npm: `npm ci` in ui/) become C
# arrays in BUILD/ui/ui_assets.c, written by the ui_embed host tool
# (ui/embed.c), served by src/serve/ui.c. Without ui/node_modules/uplot the
# agent still builds and /ui/ answers 503 saying how to get the UI.
add_executable(ui_embed ${CMAKE_SOURCE_DIR}/ui/embed.c)
target_link_libraries(ui_embed PRIVATE PkgConfig::ZLIB)

set(UI_ASSETS_C ${CMAKE_BINARY_DIR}/ui/ui_assets.c)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/ui)
set(UPLOT_DIST ${CMAKE_SOURCE_DIR}/ui/node_modules/uplot/dist)
file(GLOB UI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/ui/src/*)
# Globbed with CONFIGURE_DEPENDS so that `npm ci` after configuring is seen
# by the next build.
file(GLOB UPLOT_FILES CONFIGURE_DEPENDS ${UPLOT_DIST}/uPlot.iife.min.js ${UPLOT_DIST}/uPlot.min.css)
list(LENGTH UPLOT_FILES UPLOT_FOUND)
if(UPLOT_FOUND EQUAL 2)
  set(UI_EMBED_ARGS)
  foreach(f ${UI_SOURCES})
    get_filename_component(n ${f} NAME)
    list(APPEND UI_EMBED_ARGS "/ui/${n}=${f}")
  endforeach()
  list(APPEND UI_EMBED_ARGS "/ui/dashboards.json=${CMAKE_SOURCE_DIR}/ui/dashboards.json"
       "/ui/vendor/uPlot.iife.min.js=${UPLOT_DIST}/uPlot.iife.min.js"
       "/ui/vendor/uPlot.min.css=${UPLOT_DIST}/uPlot.min.css")
  set(UI_EMBED_DEPENDS ${UI_SOURCES} ${CMAKE_SOURCE_DIR}/ui/dashboards.json ${UPLOT_FILES})
else()
  message(WARNING "ui/node_modules/uplot is missing: mlwatch is built without its web UI "
          "(/ui/ answers 503). Run `npm ci` in ui/ (scripts/install-deps.sh test does) and build "
          "again.")
  set(UI_EMBED_ARGS --missing
      "mlwatch was built without its web UI: ui/node_modules/uplot was missing at build time. Run `npm ci` in ui/ (or scripts/install-deps.sh test), then build again.")
  set(UI_EMBED_DEPENDS)
endif()
add_custom_command(OUTPUT ${UI_ASSETS_C}
                   COMMAND ui_embed ${UI_ASSETS_C} ${UI_EMBED_ARGS}
                   DEPENDS ui_embed ${UI_EMBED_DEPENDS}
                   COMMENT "Embedding the web UI"
                   VERBATIM)
target_sources(mlwatch_core PRIVATE ${UI_ASSETS_C})
# The blob's own mapping (ui/ui_files.ld says why), in every program that
# links the library.
target_link_options(mlwatch_core INTERFACE "LINKER:-T,${CMAKE_SOURCE_DIR}/ui/ui_files.ld")

# The Grafana dashboards in deploy/grafana/ are generated from the same spec:
# they must be up to date and valid.
find_program(PYTHON3 python3)
if(PYTHON3)
  add_test(NAME grafana_dashboards
           COMMAND ${PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/grafana_dashboards.py --check
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
