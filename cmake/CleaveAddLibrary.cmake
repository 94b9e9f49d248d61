# Helpers shared by every Cleave library and tool.
#
#   cleave_add_mlir_library(<name> <sources...> [DEPENDS <targets>] [LINK <libs>])
#     A compiler-side static library that uses MLIR/LLVM headers and links the
#     monolithic libMLIR.so + libLLVM.so (never the static MLIR* archives: mixing
#     the two duplicates statics).
#   cleave_add_tool(<name> <sources...> [LINK <libs>])
#     A compiler-side executable in build/bin.

separate_arguments(CLEAVE_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")

function(cleave_mlir_target_setup target)
  target_include_directories(${target} SYSTEM PUBLIC
    ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  target_include_directories(${target} PUBLIC
    ${CLEAVE_SOURCE_DIR}/include ${CLEAVE_BINARY_DIR}/include)
  target_compile_definitions(${target} PUBLIC ${CLEAVE_LLVM_DEFINITIONS})
  # Debian's LLVM is built with RTTI on and exceptions off.
  target_compile_options(${target} PRIVATE -Wall -Wno-unused-parameter)
endfunction()

function(cleave_add_mlir_library name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;LINK" ${ARGN})
  add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  cleave_mlir_target_setup(${name})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  target_link_libraries(${name} PUBLIC ${ARG_LINK} MLIR LLVM)
endfunction()

function(cleave_add_tool name)
  cmake_parse_arguments(ARG "" "" "LINK" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  cleave_mlir_target_setup(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LINK} MLIR LLVM)
endfunction()
