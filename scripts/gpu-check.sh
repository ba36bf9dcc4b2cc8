#!/usr/bin/env bash
# scripts/gpu-check.sh -- what to run on a machine with an NVIDIA GPU. That
# machine needs no compiler toolchain: run scripts/gpu-stage.sh here first
# (it puts stripped runtime-only binaries and the libraries they need under
# .gpu/), take the working tree there, and run this from its root. It
# prints, for docs/benchmarks.md:
#
#   1. the machine: nvidia-smi, the driver, the toolkit found
#   2. correctness on the GPU: the driver-level kernel and GEMM tests
#      (test/cuda: every test's `cuda` instance -- NVRTC cubins and cuBLASLt
#      against the same references the emulated instance passes here), the
#      device conformance suite on CudaDevice over the real driver
#      (test/unit), the NVRTC compiles with ptxas statistics
#   3. rates: host<->device copy bandwidth (pinned, pageable, both
#      directions at once) and cuBLASLt bf16/fp32 TFLOP/s at Llama-8B layer
#      shapes (bench/cuda_gpu.cpp), and the same through PyTorch
#      (bench/torch_peer.py) as the peer
#
# Not yet here (docs/cuda.md says what is missing): training parity and
# throughput with `mtc-run --device cuda`, which need the CUDA backend of
# the executors.
#
#   scripts/gpu-check.sh [OUT_DIR]     (logs are also written to OUT_DIR)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/mtc-gpu-check}}
mkdir -p "$out"
bin=.gpu/bin
if [ ! -x $bin/mtc-cuda-tests ]; then
  echo "gpu-check: $bin/ is missing: run scripts/gpu-stage.sh on the build machine first" >&2
  exit 1
fi
if [ -f .gpu/lib.tar.xz ]; then
  mkdir -p /tmp/mtc-gpu-lib && tar -C /tmp/mtc-gpu-lib -xJf .gpu/lib.tar.xz
  export LD_LIBRARY_PATH=/tmp/mtc-gpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export MTC_SOURCE_DIR=$PWD MTC_CACHE_DIR=/tmp/mtc-gpu-cache
status=0
step() { echo; echo "=== $1"; }
run() { # NAME CMD...: runs CMD, logs to $out/NAME.log, remembers a failure
  local name=$1; shift
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "gpu-check: $name exited $rc"; status=1; }
}

step "machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv 2>&1 || echo "gpu-check: nvidia-smi failed"
command -v nvcc >/dev/null && nvcc --version | tail -2
uname -r; nproc; free -g | head -2

step "driver-level kernels and GEMMs on the GPU (test/cuda, instance 'cuda')"
run cuda-tests $bin/mtc-cuda-tests --gtest_filter='*/cuda' --gtest_brief=0
step "CudaDevice conformance over the real driver (test/unit)"
run device-tests $bin/mtc-unittests --gtest_filter='CudaDevice*'
step "NVRTC compiles with ptxas statistics"
# The driver's JIT cache can answer NVRTC's second compile of identical PTX
# without a ptxas log (seen on an H100, 2026-11-25): keep it out.
run nvrtc-tests env CUDA_CACHE_DISABLE=1 $bin/mtc-cuda-nvrtc-tests
step "copies and cuBLASLt through mtc (bench/cuda_gpu.cpp)"
run bench-cuda $bin/mtc-bench-cuda
step "the same through PyTorch (bench/torch_peer.py)"
run torch-peer python3 bench/torch_peer.py
echo
[ $status = 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: some steps FAILED"
exit $status
