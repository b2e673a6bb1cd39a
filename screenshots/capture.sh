#!/usr/bin/env bash
# Captures the running dashboard in tmux at 80x24 and 200x60 and renders PNGs from the captures.
# Usage: screenshots/capture.sh [path/to/infertop]   (default: target/release/infertop)
# Needs tmux, python3 with `pyte` and `Pillow`, and fonts-dejavu-core.
set -euo pipefail
cd "$(dirname "$0")"
bin="$(realpath "${1:-../target/release/infertop}")"
tmux new-session -d -s shot80 -x 80 -y 24 "$bin --warmup 3 -n 32; sleep 30"
tmux new-session -d -s shot200 -x 200 -y 60 "$bin --warmup 3 -n 32 --slo ttft=120ms,tpot=4ms; sleep 30"
sleep 12
tmux send-keys -t shot200 ']'          # double the prompt: a workload boundary `|`
sleep 10
tmux capture-pane -e -p -t shot80 > dashboard-80x24.ansi
tmux capture-pane -e -p -t shot200 > dashboard-200x60.ansi
for view in distributions bands heatmap; do   # `v` cycles the chart area at 80x24
  tmux send-keys -t shot80 v
  sleep 2
  tmux capture-pane -e -p -t shot80 > view-$view-80x24.ansi
done
tmux send-keys -t shot80 v                    # back to the per-request charts
tmux send-keys -t shot80 space
sleep 1
tmux capture-pane -e -p -t shot80 > paused-80x24.ansi
tmux send-keys -t shot80 q
tmux send-keys -t shot200 q
sleep 2
tmux kill-session -t shot80 2>/dev/null || true
tmux kill-session -t shot200 2>/dev/null || true
python3 render.py dashboard-80x24.ansi 80x24 dashboard-80x24.png
python3 render.py dashboard-200x60.ansi 200x60 dashboard-200x60.png
python3 render.py paused-80x24.ansi 80x24 paused-80x24.png
for view in distributions bands heatmap; do
  python3 render.py view-$view-80x24.ansi 80x24 view-$view-80x24.png
done
