#!/usr/bin/env bash
# check-standalone SOURCE_DIR BUILD_DIR: configures, builds and tests the
# runtime alone (-DCLEAVE_BUILD_COMPILER=OFF) in BUILD_DIR, with CMake told
# that MLIR and LLVM do not exist, as on a machine without them. Fails if any
# compile command of that build sees an LLVM or MLIR header directory.
# Run by ctest as runtime.standalone-build.
set -euo pipefail
src=$1
build=$2
rm -rf "$build"
cmake -G Ninja -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCLEAVE_BUILD_COMPILER=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON \
  > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
if grep -E -- '-I[^ ]*(llvm|mlir)|-isystem [^ ]*(llvm|mlir)' \
     "$build/compile_commands.json"; then
  echo "check-standalone: the runtime-only build includes LLVM/MLIR headers" >&2
  exit 1
fi
cmake --build "$build"
# Only the runtime's own targets exist in this build.
if ls "$build/bin" | grep -E '^cleave-(opt|run|plan|models|estimate)$'; then
  echo "check-standalone: compiler tools were built with the compiler off" >&2
  exit 1
fi
cd "$build"
ctest --output-on-failure --no-tests=error -j "$(nproc)"
