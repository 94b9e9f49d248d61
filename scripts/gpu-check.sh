#!/bin/bash
# Builds the GPU check: one folder holding the bundles of the GPU tests and
# run-all, which runs every bundle's selftest on the GPUs of the machine it
# is copied to and writes one report (docs/cuda.md, "Running on a GPU
# cluster"). No CUDA library goes inside: a GPU machine has its own.
#
#   scripts/gpu-check.sh [OUT]        (default: build/gpu-check)
#   scp -r build/gpu-check gpu-node: && ssh gpu-node gpu-check/run-all
#
# Bundles: tiny-gpt and tiny-llama on one GPU in f32 and bf16, a GPT-2-small
# step in bf16 for the throughput against the cost model, tiny-gpt
# partitioned dp=2 x tp=2 for machines with 4 GPUs, and tiny models with
# several attention tiles a sequence and with the materialised attention.
# They share one lib/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CLEAVE_BUILD_DIR:-$root/build}"
out="${1:-$build/gpu-check}"
run="$build/bin/cleave-run"
for f in "$run" "$build/bin/cleave-bundle-run" "$build/bin/cleave-bench-gemm" \
         "$build/bin/CleaveCudaRuntimeTests" "$build/lib/libCleaveRuntimeCuda.so"; do
  if [ ! -e "$f" ]; then
    echo "gpu-check: $f is missing: build Cleave with CUDA first (scripts/build.sh)" >&2
    exit 1
  fi
done
rm -rf "$out"
mkdir -p "$out"

emit() {
  local name="$1"; shift
  echo "gpu-check: $name"
  if ! "$run" "$@" --backend cuda --emit-bundle "$out/$name" > "$out/$name.log" 2>&1; then
    cat "$out/$name.log" >&2
    exit 1
  fi
  rm -f "$out/$name.log"
}
emit tiny-gpt-f32 --model tiny-gpt
emit tiny-gpt-bf16 --model tiny-gpt --dtype bf16
emit tiny-llama-f32 --model tiny-llama
emit tiny-llama-bf16 --model tiny-llama --dtype bf16
emit gpt2-small-bf16 --model gpt2-small --dtype bf16 --batch 4 --steps 30
emit tiny-gpt-dp2-tp2 --model tiny-gpt -n 4 --plan dp=2,tp=2
# Attention (docs/attention.md): every bundle above uses the flash lowering
# with tiles of 128 rows, one tile a sequence for the tiny models (32
# positions); tiles of 8 run the online softmax over 4 key tiles, skip the
# causal ones and mask the diagonal (GQA in tiny-llama); tile 0 keeps the
# materialised lowering checked.
emit tiny-gpt-f32-attn8 --model tiny-gpt --attention-tile 8
emit tiny-llama-bf16-attn8 --model tiny-llama --dtype bf16 --attention-tile 8
emit tiny-gpt-f32-attn0 --model tiny-gpt --attention-tile 0
# GPT-2 small's throughput with the materialised attention, against the
# tiled default above (8 tiles a sequence: many more launches).
emit gpt2-small-bf16-attn0 --model gpt2-small --dtype bf16 --batch 4 --steps 30 --attention-tile 0

# One lib/ and bin/ for all: the bundles were made by the same build.
mv "$out/tiny-gpt-f32/lib" "$out/lib"
mv "$out/tiny-gpt-f32/bin" "$out/bin"
for d in "$out"/*/; do
  d="${d%/}"
  case "$d" in "$out/lib" | "$out/bin") continue ;; esac
  for sub in lib bin; do
    if [ -d "$d/$sub" ] && [ ! -L "$d/$sub" ]; then
      for f in "$d/$sub"/*; do
        cmp -s "$f" "$out/$sub/$(basename "$f")" || {
          echo "gpu-check: $f differs from the shared $sub/" >&2; exit 1; }
      done
      rm -rf "${d:?}/$sub"
    fi
    [ -e "$d/$sub" ] || ln -s "../$sub" "$d/$sub"
  done
done
# The runtime's GPU tests (GEMMs against the CPU, every collective), which
# need only the runtime.
cp "$build/bin/CleaveCudaRuntimeTests" "$out/bin/"
# cuBLASLt's throughput on the step's GEMM shapes (bench/cuda/GemmBench.cpp).
cp "$build/bin/cleave-bench-gemm" "$out/bin/"
strip --strip-unneeded "$out"/bin/* "$out"/lib/libCleave* 2>/dev/null || true

cat > "$out/run-all" <<'SH'
#!/bin/bash
# Runs the selftest of every bundle here on this machine's GPUs and writes
# the report (default: report.txt here). Exits non-zero if any failed.
set -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
report="${1:-$here/report.txt}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
failed=0; passed=0; skipped=0
{
  echo "cleave gpu-check on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/  /'
} > "$report"
echo "== runtime GPU tests (CleaveCudaRuntimeTests)" | tee -a "$report"
if "$here/tiny-gpt-f32/run" --exec "$here/bin/CleaveCudaRuntimeTests" 2>&1 |
   tee -a "$report"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
echo "== GEMM throughput (cleave-bench-gemm)" | tee -a "$report"
"$here/tiny-gpt-f32/run" --exec "$here/bin/cleave-bench-gemm" 2>&1 | tee -a "$report"
for manifest in "$here"/*/bundle.json; do
  dir="$(dirname "$manifest")"; name="$(basename "$dir")"
  world=$(sed -n 's/^ *"world": *\([0-9]*\).*/\1/p' "$manifest")
  if [ "${world:-1}" -gt "$gpus" ]; then
    echo "== $name: SKIPPED (needs $world GPUs, this machine has $gpus)" | tee -a "$report"
    skipped=$((skipped + 1)); continue
  fi
  args=(); [ "${world:-1}" -gt 1 ] && args=(-n "$world")
  echo "== $name" | tee -a "$report"
  if "$dir/run" --selftest "${args[@]}" 2>&1 | tee -a "$report"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done
echo "== run-all: $passed passed, $failed failed, $skipped skipped" | tee -a "$report"
echo "report: $report"
[ "$failed" -eq 0 ]
SH
chmod +x "$out/run-all"
echo "gpu-check: wrote $out ($(du -sh "$out" | cut -f1)); copy it to a GPU machine and run $out/run-all"
