# cmake -DINPUT=report.html -DOUTPUT=ReportTemplate.inc -P EmbedTemplate.cmake
# Writes the page template as a C++ raw string literal, kTemplate.
file(READ "${INPUT}" text)
string(FIND "${text}" ")cleave_page\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT}: contains the raw-string delimiter )cleave_page\"")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by EmbedTemplate.cmake; do not edit.\n"
  "constexpr std::string_view kTemplate = R\"cleave_page(${text})cleave_page\";\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
