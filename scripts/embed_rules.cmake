# embed_rules.cmake - writes the shipped rules (deploy/prometheus/mlwatch-rules.yml)
# as a C array, so that the agent evaluates them without a file to find
# (src/rules/rules_engine.c, docs/rules.md). Run by CMakeLists.txt:
#   cmake -DIN=rules.yml -DOUT=shipped_rules.c -P embed_rules.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR n "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT}
     "/* shipped_rules.c - generated from deploy/prometheus/mlwatch-rules.yml by scripts/embed_rules.cmake. */\n"
     "#include <stddef.h>\n"
     "extern const char mw_shipped_rules[];\n"
     "extern const size_t mw_shipped_rules_len;\n"
     "const char mw_shipped_rules[] = {${bytes} 0};\n"
     "const size_t mw_shipped_rules_len = ${n};\n")
