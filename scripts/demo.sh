#!/usr/bin/env bash
# The Cleave demo: installs what is missing, builds, and runs it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CLEAVE_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

opt="$build/bin/cleave-opt"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "A two-layer MLP with a data x tensor parallel sharding (examples/mlp.mlir)"
"$opt" "$root/examples/mlp.mlir"

say "The factor-based sharding rule of every op in a GPT block"
"$opt" "$root/examples/gpt_block.mlir" --cleave-print-sharding-rules \
  --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 |
  sed -n 's/^.*gpt_block.mlir:\([0-9]*\):[0-9]*: remark: sharding rule: /  line \1: /p'

say "Bad input gets a diagnostic that says what is wrong and where"
bad=$(mktemp --suffix=.mlir)
trap 'rm -f "$bad"' EXIT
cat >"$bad" <<'MLIR'
cleave.mesh @cpu(dp = 2 : host, tp = 4 : host)
func.func @f(%x: tensor<6x16xf32> {cleave.sharding = #cleave.sharding<@cpu, [dp, tp]>},
             %w: tensor<32x16xf32>) -> tensor<6x16xf32> {
  %y = cleave.matmul %x, %w : (tensor<6x16xf32>, tensor<32x16xf32>) -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}
MLIR
"$opt" "$bad" -o /dev/null 2>&1 | sed 's|^.*/tmp/[^:]*|  input.mlir|' || true
