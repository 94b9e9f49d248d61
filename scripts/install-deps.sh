#!/usr/bin/env bash
# Installs the Debian 12 packages Cleave needs, if any are missing.
# Idempotent: does nothing when everything is installed. Runs apt-get as root,
# or through sudo.
set -euo pipefail

packages=(
  # build
  cmake ninja-build g++ ccache pkg-config
  # MLIR / LLVM 19
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  # libraries: JSON, Abseil (plain-C++ libraries), CBC (the planner's integer programs)
  nlohmann-json3-dev libabsl-dev coinor-libcbc-dev
  # the formatting check run by the tests
  clang-format-19
  # tests (lit runs on Debian's Python)
  libgtest-dev libgmock-dev python3
  # the report pages in a real browser (test/Report/check-html.py)
  chromium
  # the PyTorch front-end and its tests (torch 1.13 for /usr/bin/python3)
  python3-torch
  # runtime (lib/Runtime): Gloo collectives, OpenBLAS GEMM, crc32, JSON headers
  libgloo-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "cleave: installing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "cleave: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
