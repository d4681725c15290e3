# Writes OUTPUT: a C++ source whose function NAMESPACE::FUNCTION() returns INPUT's bytes as a
# std::string_view, so that a file kept as itself in the source tree (the chat page, edited as
# HTML) is part of the binary. Run at build time: cmake -DINPUT=... -DOUTPUT=... -DHEADER=...
# -DNAMESPACE=... -DFUNCTION=... -P embed_file.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Sixteen bytes a line keep the generated file readable in an editor.
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
       "\\1\n" bytes "${bytes}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
     "// Generated from ${name} at build time; edit that file, not this one.\n"
     "#include \"${HEADER}\"\n\n"
     "namespace ${NAMESPACE} {\n\n"
     "namespace {\n"
     "constexpr unsigned char kBytes[] = {\n${bytes}\n};\n"
     "}  // namespace\n\n"
     "std::string_view ${FUNCTION}() {\n"
     "    return {reinterpret_cast<const char*>(kBytes), sizeof kBytes};\n"
     "}\n\n"
     "}  // namespace ${NAMESPACE}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
