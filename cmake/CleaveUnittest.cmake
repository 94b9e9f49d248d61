# cleave_add_unittest(<name> <sources...> [LINK <libs>])
#   A GoogleTest executable (Debian's GoogleTest: llvm-19-dev exports no
#   llvm_gtest), its tests discovered by ctest. Used by the compiler's and the
#   runtime's unit tests alike, so it needs nothing of LLVM.
function(cleave_add_unittest name)
  cmake_parse_arguments(ARG "" "" "LINK" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${ARG_LINK} GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()
