#!/usr/bin/env bash
# The Cleave demo: installs what is missing, builds, and runs it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CLEAVE_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

bin="$build/bin"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. A model is a cleave program: the zoo's GPT, one layer (cleave-models)"
"$bin/cleave-models" --model tiny-gpt --layers 1 | head -20
echo "   ..."

say "2. Each op says how it can be split: the sharding rule of attention"
"$bin/cleave-models" --model tiny-llama --layers 1 |
  "$bin/cleave-opt" --cleave-print-sharding-rules --mlir-print-op-on-diagnostic=false \
    -o /dev/null 2>&1 | grep -m1 "cleave.attention\|sharding rule: (\[i, j, (k" |
  sed 's/^.*remark: /   /'

say "3. Train a character-level GPT on a text every Debian system ships"
echo "   (the GPL-3 text, embedded at build time; 4 layers, hidden 128, FFN 256, 4 heads,"
echo "    context 64, batch 16, AdamW; compiled to native code through MLIR)"
"$bin/cleave-run" --model tiny-gpt --layers 4 --hidden 128 --heads 4 --ffn 256 --seq 64 \
  --batch 16 --steps 200 --lr 3e-3 --log-every 50

say "4. The same model on 4 local ranks, data x tensor parallel (dp=2, tp=2)"
echo "   (Megatron column/row splits, collectives over Gloo; one compilation,"
echo "    4 forked ranks, parameters and batches sliced from the global ones)."
echo "   100 SGD steps on one process, then on 4 ranks, losses side by side:"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
gpt=(--model tiny-gpt --layers 4 --hidden 128 --heads 4 --ffn 256 --seq 64 --batch 16
     --steps 100 --optimizer sgd --lr 0.5 --log-every 100)
"$bin/cleave-run" "${gpt[@]}" --save-losses "$out/one.st" > /dev/null
"$bin/cleave-run" "${gpt[@]}" -n 4 --plan dp=2,tp=2 --save-losses "$out/four.st" |
  grep -v "^\[rank 0\] step"
python3 "$root/scripts/compare-losses.py" "$out/one.st" "$out/four.st" --every 20
echo "   (Only the order of floating-point sums differs. With AdamW the runs agree"
echo "    as closely for the first steps, then drift apart: Adam turns rounding"
echo "    noise in near-zero gradients into full-size steps; docs/partitioning.md.)"

say "5. Let the planner choose the plan for the 4 local ranks, then run it"
"$bin/cleave-run" "${gpt[@]}" -n 4 --plan auto --save-losses "$out/auto.st" |
  grep -v "^\[rank 0\] step"
python3 "$root/scripts/compare-losses.py" "$out/one.st" "$out/auto.st" --every 50

say "6. Plan GPT-3 175B on 1,024 A100s: the best plan, the runners-up and why they lost"
"$bin/cleave-plan" --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 \
  --global-batch 1536 2>&1 | sed -n 1,24p
echo "   ... (per-tensor shardings and layout changes follow; --json writes it all)"
