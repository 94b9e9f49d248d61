#!/usr/bin/env bash
# Fails, naming each file, when a C or C++ source of the project is not
# formatted as .clang-format says (clang-format-19; Debian's default
# clang-format 14 formats some constructs differently). Run by ctest as
# format.clang-format; `scripts/check-format.sh --fix` formats in place.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
format=${CLANG_FORMAT:-clang-format-19}
command -v "$format" >/dev/null ||
  { echo "check-format: $format not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
mapfile -t files < <(cd "$root" && find include lib tools unittests bench examples test \
  -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.c' \) 2>/dev/null | sort)
[ ${#files[@]} -gt 0 ] || { echo "check-format: no sources found under $root" >&2; exit 2; }
cd "$root"
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$format" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted (scripts/check-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
