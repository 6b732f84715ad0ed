# Writes ${IN} into ${OUT} as `const char SYM[]` (NUL-terminated) and `const size_t SYM_size`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* Generated from ${IN}; do not edit. */\n#include <stddef.h>\n"
     "const char ${SYM}[] = {\n${body}0x00};\nconst size_t ${SYM}_size = ${bytes};\n")
