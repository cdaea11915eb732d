# cmake -DINPUT=file -DOUTPUT=file.cc -DSYMBOL=name -P embed_binary.cmake
# Writes a C++ source defining `extern "C" const unsigned char SYMBOL[]` (16-byte aligned, as
# cuModuleLoadData wants for fatbins) and `extern "C" const size_t SYMBOL_size`.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by embed_binary.cmake. Do not edit.\n#include <cstddef>\nextern \"C\" {\nalignas(16) extern const unsigned char ${SYMBOL}[] = {\n${bytes}};\nextern const size_t ${SYMBOL}_size = ${size};\n}\n")
