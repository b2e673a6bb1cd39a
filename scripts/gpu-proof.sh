#!/usr/bin/env bash
# One pass over the CUDA path on a machine with one NVIDIA GPU, no Rust and no network, in about
# five minutes; everything it measures goes under OUT for reading afterwards.
#
#   scripts/gpu-proof.sh BIN OUT
#
# BIN: infertop built with `--release --features cuda` (CUDA_COMPUTE_CAP of the GPU).
# Runs, each bounded by its own timeout so that one stuck step leaves the others' results:
#   devices      `infertop devices` (NVML: name, driver, memory, bandwidth)
#   gpu-check    scripts/gpu-check.sh (CUDA events <= wall, memory growth, roofline)
#   8b, 1b       synthetic llama-3-8b and llama-3.2-1b in bf16, prompts 128/1024/4096 cycled,
#                every decode step recorded (CUDA-event and wall time per step)
#   batch        a sweep of llama-3.2-1b over batch 1, 8, 32 at prompt 1024 (memory by batch)
#   oom          prompts of 512 then one of 32768 at batch 8: out of memory on purpose; the
#                exit code, the one-line error and the record written before it are kept
#   dashboard    the dashboard in tmux at 160x45 for 60 s (captured at 30 s and 60 s, with
#                colours), resized to 80x24, then `q`
set -u
BIN=${1:?usage: gpu-proof.sh BIN OUT}
OUT=${2:?usage: gpu-proof.sh BIN OUT}
mkdir -p "$OUT"
exec > >(tee "$OUT/proof.log") 2>&1
step() { echo "== $1 ($(date -u +%H:%M:%S))"; }
HEADLESS=(--headless --device cuda:0 --dtype bf16 --format json --jsonl-steps --sample-interval 50ms)

step "machine"
nvidia-smi || true
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv || true
nproc; free -g | head -2

step "devices"
timeout 30 "$BIN" devices >"$OUT/devices.txt" 2>&1; echo "exit $?"
cat "$OUT/devices.txt"
timeout 30 "$BIN" devices --format json >"$OUT/devices.json" 2>&1

step "gpu-check"
timeout 100 bash "$(dirname "$0")/gpu-check.sh" "$BIN" >"$OUT/gpu-check.txt" 2>&1; echo "exit $?"
cat "$OUT/gpu-check.txt"

for preset in llama-3-8b llama-3.2-1b; do
  step "$preset bf16, prompts 128/1024/4096"
  limit=$([ "$preset" = llama-3-8b ] && echo 120 || echo 60)
  timeout "$limit" "$BIN" "${HEADLESS[@]}" --model "synthetic:$preset" \
    -p 128,1024,4096 -n 64 --warmup 3 --requests 9 --record "$OUT/$preset.jsonl" \
    >"$OUT/$preset.out" 2>"$OUT/$preset.err"
  echo "exit $?"; tail -3 "$OUT/$preset.err"
done

step "batch 1, 8, 32 at prompt 1024 (llama-3.2-1b)"
timeout 60 "$BIN" sweep --device cuda:0 --dtype bf16 --model synthetic:llama-3.2-1b \
  -b 1,8,32 -p 1024 -n 32 --requests 4 --warmup 1 --format json \
  --record "$OUT/batch.jsonl" >"$OUT/batch.out" 2>"$OUT/batch.err"
echo "exit $?"; tail -3 "$OUT/batch.err"

step "out of memory on purpose"
timeout 60 "$BIN" "${HEADLESS[@]}" --model synthetic:llama-3.2-1b -b 8 \
  -p 512,512,512,32768 -n 8 --warmup 1 --requests 6 --record "$OUT/oom.jsonl" \
  >"$OUT/oom.out" 2>"$OUT/oom.err"
echo "exit $?"; cat "$OUT/oom.err" | tail -5

step "dashboard in tmux, 60 s at 160x45, then 80x24"
tmux kill-session -t proof 2>/dev/null
tmux new-session -d -s proof -x 160 -y 45 \
  "$BIN --device cuda:0 --model synthetic:llama-3.2-1b -p 128,1024 -n 128 --record $OUT/dashboard.jsonl 2>$OUT/dashboard.err; echo exit \$? >$OUT/dashboard.exit; sleep 30"
sleep 30; tmux capture-pane -p -e -t proof >"$OUT/dashboard-30s.ansi"
sleep 30; tmux capture-pane -p -e -t proof >"$OUT/dashboard-60s.ansi"
tmux capture-pane -p -t proof >"$OUT/dashboard-60s.txt"
tmux resize-window -t proof -x 80 -y 24 2>/dev/null || tmux resize-pane -t proof -x 80 -y 24
sleep 3; tmux capture-pane -p -e -t proof >"$OUT/dashboard-80x24.ansi"
tmux send-keys -t proof q; sleep 3
tmux capture-pane -p -t proof >"$OUT/dashboard-after-q.txt"
tmux kill-session -t proof 2>/dev/null
cat "$OUT/dashboard-60s.txt"; cat "$OUT/dashboard.exit" 2>/dev/null
step "done"
