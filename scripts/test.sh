#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (lit and GoogleTest,
# all under ctest). Exits non-zero if anything fails or no test ran.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CLEAVE_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure --no-tests=error -j "$(nproc)" "$@"
