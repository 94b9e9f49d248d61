# Fails if libCleaveRuntime depends on a LLVM or MLIR shared library or
# defines LLVM/MLIR symbols. Run by ctest as runtime.no-llvm-dependency.
execute_process(COMMAND readelf -d ${LIB} OUTPUT_VARIABLE dynamic
                RESULT_VARIABLE rv)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "readelf -d ${LIB} failed")
endif()
string(REGEX MATCHALL "NEEDED[^\n]*" needed "${dynamic}")
message(STATUS "libCleaveRuntime needs: ${needed}")
foreach(line ${needed})
  if(line MATCHES "LLVM|MLIR|mlir")
    message(FATAL_ERROR "libCleaveRuntime depends on ${line}")
  endif()
endforeach()
execute_process(COMMAND nm -DC --defined-only ${LIB} OUTPUT_VARIABLE symbols)
if(symbols MATCHES "llvm::|mlir::")
  message(FATAL_ERROR "libCleaveRuntime defines LLVM/MLIR symbols")
endif()
