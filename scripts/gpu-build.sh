#!/usr/bin/env bash
# Builds infertop with `--features cuda` on a machine with no GPU and no CUDA install, for a GPU
# machine that has the CUDA 13 runtime (libcudart, libcublas, libcurand, the driver's libcuda):
#
#   scripts/gpu-build.sh [DIR]      (default: target/gpu)
#
# The compiler and the libraries to link against come from PyPI wheels (into DIR/venv); the
# driver's libcuda, which no wheel has, is linked against a stub of the symbols the build uses
# (the GPU machine's own is loaded at run time). Writes DIR/infertop.gz and nothing else there,
# so that DIR can be carried to the GPU machine: the release binary, stripped and compressed
# (gunzip it there), built for CUDA_COMPUTE_CAP (default 90). The wheels and the stub go to
# target/gpu-build.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/gpu}
mkdir -p "$dir"
work=target/gpu-build
venv="$work/venv"
if [ ! -x "$venv/bin/libs-ok" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-cuda-crt==13.0.88 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85 \
    nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
  touch "$venv/bin/libs-ok"
fi
cu13="$(echo "$PWD/$venv"/lib/python3*/site-packages/nvidia/cu13)"
# The linker looks for the unversioned names.
for lib in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libcudart.so.13; do
  ln -sf "$lib" "$cu13/lib/${lib%%.so*}.so"
done
export PATH="$cu13/bin:$PATH" CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDAFORGE_THREADS=2
# The driver API symbols the build references, as empty functions of a libcuda.so.1.
stubs="$PWD/$work/stubs"
mkdir -p "$stubs"
cargo build --release --features cuda --lib
nm target/release/deps/libcudarc-*.rlib 2>/dev/null |
  awk '$1 == "U" && $2 ~ /^cu[A-Z]/ { print "void " $2 "(void) {}" }' | sort -u >"$stubs/libcuda.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stubs/libcuda.so" "$stubs/libcuda.c"
LIBRARY_PATH="$stubs:$cu13/lib" cargo build --release --features cuda
strip -o "$dir/infertop" target/release/infertop
gzip -9 -f "$dir/infertop"
ls -l "$dir/infertop.gz"
