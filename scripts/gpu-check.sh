#!/usr/bin/env bash
# Proves the CUDA path on a machine with one NVIDIA GPU and no network.
#
#   scripts/gpu-check.sh [path/to/infertop]     (default: target/release/infertop, built with
#                                                --features cuda if cargo is there)
#
# Checks: the binary sees the GPU through NVML; the tiny synthetic model and a larger preset run
# headless on cuda:0; TTFT/TPOT are positive and plausible; GPU time (CUDA events) <= wall time for
# every decode step and every prefill; device memory used grows after the model loads; the
# per-request memory peak grows with the prompt length; decode tok/s is printed beside the
# memory-bandwidth roofline (weight bytes / peak bandwidth). Prints a compact report; exits 1 on any
# failed check, 2 when there is no GPU to check.
set -u
BIN=${1:-target/release/infertop}
PRESET=${GPU_CHECK_PRESET:-llama-3.2-1b}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
ok()   { printf '  ok    %s\n' "$*"; }
bad()  { printf '  FAIL  %s\n' "$*"; fail=1; }

echo "infertop gpu-check ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU found (nvidia-smi is missing or lists no device); nothing was checked."
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/  gpu   /'

if [ ! -x "$BIN" ]; then
  if command -v cargo >/dev/null 2>&1; then
    echo "  building $BIN with --features cuda"
    cargo build --release --features cuda >"$WORK/build.log" 2>&1 || { tail -20 "$WORK/build.log"; exit 1; }
  else
    echo "gpu-check: $BIN not found and no cargo to build it; build it elsewhere with --features cuda and pass its path"
    exit 1
  fi
fi
command -v python3 >/dev/null 2>&1 || { echo "gpu-check: python3 is needed to read the JSON results"; exit 1; }

# 1. NVML
"$BIN" devices --format json >"$WORK/devices.json" 2>"$WORK/devices.err"
python3 - "$WORK/devices.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
gpus = d.get("gpus") or []
if not gpus:
    print("  FAIL  NVML lists no GPU:", d.get("nvml_unavailable") or d); sys.exit(1)
g = gpus[0]
print(f"  ok    NVML: {g.get('name')} driver {d.get('driver_version')} CUDA {d.get('cuda_driver_version')} "
      f"bandwidth {g.get('memory_bandwidth_bytes_per_s', 0)/1e9:.0f} GB/s")
PY

run() { # name, args...
  local name=$1; shift
  timeout 300 "$BIN" --headless --device cuda:0 --format json --jsonl-steps --sample-interval 50ms \
     --record "$WORK/$name.jsonl" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  if [ $rc -ne 0 ]; then bad "$name: exit $rc: $(tail -1 "$WORK/$name.err")"; return 1; fi
  ok "$name: ran ($*)"
}

# 2. the tiny model written to disk and loaded back, and a real shape in memory
"$BIN" make-model "$WORK/tiny" --preset tiny >/dev/null 2>&1 || bad "make-model tiny"
run tiny --model "$WORK/tiny" --requests 6 -p 128 -n 32
run big128 --model "synthetic:$PRESET" --requests 6 -p 128 -n 64
run big1024 --model "synthetic:$PRESET" --requests 4 -p 1024 -n 16

python3 - "$WORK" "$PRESET" <<'PY' || fail=1
import json, os, sys
work, preset = sys.argv[1], sys.argv[2]
failed = False
def bad(m):
    global failed; failed = True; print("  FAIL ", m)
def ok(m): print("  ok   ", m)
def load(name):
    p = os.path.join(work, name + ".jsonl")
    if not os.path.exists(p): return None
    return [json.loads(l) for l in open(p) if l.strip()]
devs = json.load(open(os.path.join(work, "devices.json")))
bw = ((devs.get("gpus") or [{}])[0]).get("memory_bandwidth_bytes_per_s")
peaks = {}
for name in ("tiny", "big128", "big1024"):
    rec = load(name)
    if rec is None: bad(f"{name}: no record"); continue
    reqs = [r for r in rec if r["type"] == "request"]
    steps = [r for r in rec if r["type"] == "step"]
    tel = [r for r in rec if r["type"] == "telemetry"]
    header = rec[0]
    model = next((r.get("model") for r in rec if r.get("event") == "run_started"), {}) or {}
    if not reqs: bad(f"{name}: no requests"); continue
    ttft = sorted(r["ttft_s"] for r in reqs if not r["warmup"])
    tpot = sorted(r["tpot_s"] for r in reqs if not r["warmup"] and r.get("tpot_s"))
    if ttft and tpot and all(0 < t < 10 for t in ttft) and all(0 < t < 1 for t in tpot):
        ok(f"{name}: TTFT p50 {ttft[len(ttft)//2]*1e3:.2f} ms, TPOT p50 {tpot[len(tpot)//2]*1e3:.3f} ms")
    else:
        bad(f"{name}: implausible TTFT {ttft} / TPOT {tpot}")
    over = [s for s in steps if s.get("gpu_s") is None or s["gpu_s"] > s["itl_s"]]
    if steps and not over:
        host = [s["itl_s"] - s["gpu_s"] for s in steps]
        ok(f"{name}: GPU time <= wall time for all {len(steps)} decode steps "
           f"(host overhead mean {sum(host)/len(host)*1e6:.0f} us)")
    else:
        bad(f"{name}: {len(over)} of {len(steps)} steps lack GPU time or have GPU > wall")
    pre = [r for r in reqs if r.get("gpu_ttft_s") is None or r["gpu_ttft_s"] > r["ttft_s"]]
    if pre: bad(f"{name}: {len(pre)} prefills lack GPU time or have GPU > wall")
    used = [t["device_used_bytes"] for t in tel if t.get("device_used_bytes")]
    if len(used) >= 2 and max(used) > used[0]:
        ok(f"{name}: device memory used grew {used[0]/1e9:.2f} -> {max(used)/1e9:.2f} GB")
    elif name != "tiny":
        bad(f"{name}: device memory did not grow after loading (samples: {len(used)})")
    peaks[name] = max(r.get("peak_alloc_bytes") or 0 for r in reqs)
    if name.startswith("big") and bw and tpot:
        wb = model.get("weight_bytes") or 0
        floor = wb / bw
        ok(f"{name}: decode {1/tpot[len(tpot)//2]:.1f} tok/s; roofline {1/floor:.1f} tok/s "
           f"(weights {wb/1e9:.2f} GB / {bw/1e9:.0f} GB/s), {floor/tpot[len(tpot)//2]*100:.0f}% of peak")
if "big128" in peaks and "big1024" in peaks:
    if peaks["big1024"] > peaks["big128"]:
        ok(f"memory peak grows with prompt length: {peaks['big128']/1e9:.3f} GB (P=128) -> {peaks['big1024']/1e9:.3f} GB (P=1024)")
    else:
        bad(f"memory peak did not grow with prompt length: {peaks}")
sys.exit(1 if failed else 0)
PY

if [ $fail -ne 0 ]; then echo "gpu-check: FAILED"; exit 1; fi
echo "gpu-check: all checks passed"
