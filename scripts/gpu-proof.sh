#!/usr/bin/env bash
# A pass over the CUDA path on a machine with one NVIDIA GPU, no Rust and no network; everything
# it measures goes under OUT for reading afterwards.
#
#   scripts/gpu-proof.sh BIN OUT [STEP ...]      (default: every step, in this order)
#
# BIN: infertop built with `--release --features cuda` (scripts/gpu-build.sh). Each step is
# bounded by its own timeout, so one stuck step leaves the others' results; naming steps runs
# only those (several calls of a few steps each lose less if a machine goes away mid-call):
#   devices      `infertop devices` (NVML: name, driver, memory, bandwidth)            30 s at most
#   check        scripts/gpu-check.sh (CUDA events <= wall, memory growth, roofline)  100 s
#   8b           synthetic llama-3-8b in bf16, prompts 128/1024/4096 cycled, every
#                decode step recorded (CUDA-event and wall time per step)             120 s
#   1b           the same for llama-3.2-1b                                              60 s
#   oom          prompts of 512 then one of 32768 at batch 8: out of memory on purpose;
#                the exit code, the one-line error and the record before it are kept    60 s
#   batch        a sweep of llama-3.2-1b over batch 1, 8, 32 at prompt 1024             60 s
#   dashboard    the dashboard in tmux at 160x45 for 60 s (captured at 30 s and 60 s,
#                with colours), resized to 80x24, then `q`                              70 s
set -u
BIN=${1:?usage: gpu-proof.sh BIN OUT [STEP ...]}
OUT=${2:?usage: gpu-proof.sh BIN OUT [STEP ...]}
shift 2
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(devices check 8b 1b oom batch dashboard)
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/proof.log") 2>&1
HEADLESS=(--headless --device cuda:0 --dtype bf16 --format json --jsonl-steps --sample-interval 50ms)

devices() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv || true
  timeout 30 "$BIN" devices >"$OUT/devices.txt" 2>&1; echo "exit $?"
  cat "$OUT/devices.txt"
  timeout 30 "$BIN" devices --format json >"$OUT/devices.json" 2>&1
}

check() {
  timeout 100 bash "$HERE/gpu-check.sh" "$BIN" >"$OUT/gpu-check.txt" 2>&1; echo "exit $?"
  cat "$OUT/gpu-check.txt"
}

# preset, timeout: prompts 128/1024/4096 cycled, 3 warmup and 2 steady requests of each.
prompts() {
  timeout "$2" "$BIN" "${HEADLESS[@]}" --model "synthetic:$1" -p 128,1024,4096 -n 64 \
    --warmup 3 --requests 9 --record "$OUT/$1.jsonl" >"$OUT/$1.out" 2>"$OUT/$1.err"
  echo "exit $?"; tail -3 "$OUT/$1.err"
}

oom() {
  timeout 60 "$BIN" "${HEADLESS[@]}" --model synthetic:llama-3.2-1b -b 8 \
    -p 512,512,512,32768 -n 8 --warmup 1 --requests 6 --record "$OUT/oom.jsonl" \
    >"$OUT/oom.out" 2>"$OUT/oom.err"
  echo "exit $?"; tail -5 "$OUT/oom.err"
}

batch() {
  timeout 60 "$BIN" sweep --device cuda:0 --dtype bf16 --model synthetic:llama-3.2-1b \
    -b 1,8,32 -p 1024 -n 32 --requests 4 --warmup 1 --format json \
    --record "$OUT/batch.jsonl" >"$OUT/batch.out" 2>"$OUT/batch.err"
  echo "exit $?"; tail -3 "$OUT/batch.err"
}

dashboard() {
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
}

for s in "${STEPS[@]}"; do
  echo "== $s ($(date -u +%H:%M:%S))"
  case $s in
    devices | check | oom | batch | dashboard) "$s" ;;
    8b) prompts llama-3-8b 120 ;;
    1b) prompts llama-3.2-1b 60 ;;
    *) echo "gpu-proof: unknown step \`$s\` (steps: devices check 8b 1b oom batch dashboard)"; exit 2 ;;
  esac
done
echo "== done ($(date -u +%H:%M:%S))"
