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
#   4. training parity: `mtc-run train --device cuda` against `--device cpu`
#      on the same bundle, 5 steps, fp32, for every `parity` run that
#      gpu-stage.sh listed in .gpu/bundles/runs.txt (tiny-llama,
#      gemma2-small, mixtral-small; resident and streamed): the largest
#      relative difference of the losses and of the gradient norms
#      (mixtral-small: the MoE routing on the device), against 1e-4; then
#      the `bf16` runs (the same models compiled with --precision bf16)
#      against the fp32 `--device cpu` runs, within 1e-2
#   4b. NCCL: the tiny-llama streamed run again with --dist-backend nccl
#      over one rank (the real libnccl.so.2 on the GPU, the emulated NCCL in
#      the dry run), bit for bit against the run without it
#   5. training throughput: `mtc-run train --device cuda` of the
#      `throughput` runs (a 1B-class Llama streamed and resident, fp32 and
#      bf16, at 64k tokens per step; an 8B-class one only where its host
#      state, 16 B/param, fits in the memory available, and one at 12
#      B/param with --clip 0 and a checkpoint every second layer, which fits
#      a 128 GiB host): tokens/s, achieved TFLOPS, MFU, host->device GB/s
#      and overlap (scripts/gpu-check-report.py says how each is counted)
#      beside what `mtc simulate` predicted for the GPU's profile, then the
#      same model in PyTorch eager on the GPU (bench/gpu_peer.py)
#
#   scripts/gpu-check.sh [OUT_DIR]     (logs are also written to OUT_DIR)
#
# Dry run here, without a GPU: `scripts/gpu-stage.sh --dry-run` (tiny
# shapes), then `MTC_GPU_CHECK_DEVICE=cuda-emu scripts/gpu-check.sh`: steps 4
# and 5 on the emulated driver (1-3 need the GPU and are skipped; the peer
# needs PyTorch with CUDA and says so when it is missing).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/mtc-gpu-check}}
mkdir -p "$out"
bin=.gpu/bin
dev=${MTC_GPU_CHECK_DEVICE:-cuda}
case $dev in
  cuda|cuda-emu) ;;
  *) echo "gpu-check: MTC_GPU_CHECK_DEVICE must be cuda or cuda-emu, not '$dev'" >&2; exit 1 ;;
esac
if [ ! -x $bin/mtc-cuda-tests ] || [ ! -x $bin/mtc-run ]; then
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

if [ "$dev" = cuda ]; then
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
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
else
  step "dry run on --device $dev: the GPU-only steps (machine, kernels, rates) are skipped"
  gpu="emulated ($dev)"
fi

runs=.gpu/bundles/runs.txt
data=data/corpus.txt
# train NAME DEVICE BUNDLE FLAGS...: 5 steps of mtc-run, metrics in
# $out/NAME.jsonl and the log in $out/NAME.log; returns mtc-run's status.
train() {
  local name=$1 device=$2 bundle=$3; shift 3
  rm -f "$out/$name.jsonl"
  $bin/mtc-run train ".gpu/bundles/$bundle" --data $data --steps 5 "$@" \
    --eval-every 0 --val-fraction 0 --device "$device" \
    --metrics "$out/$name.jsonl" > "$out/$name.log" 2>&1 < /dev/null
}

step "training parity: mtc-run --device $dev against --device cpu (5 steps, fp32)"
while read -r kind name bundle params flags; do
  [ "$kind" = parity ] || continue
  # shellcheck disable=SC2086
  if ! train "$name-cpu" cpu "$bundle" $flags; then
    echo "$name: the --device cpu run failed ($out/$name-cpu.log):"
    tail -3 "$out/$name-cpu.log"; status=1; continue
  fi
  # shellcheck disable=SC2086
  if ! train "$name-$dev" "$dev" "$bundle" $flags; then
    echo "$name: the --device $dev run failed ($out/$name-$dev.log):"
    tail -3 "$out/$name-$dev.log"; status=1; continue
  fi
  python3 scripts/gpu-check-report.py parity "$name" \
    "$out/$name-cpu.jsonl" "$out/$name-$dev.jsonl" 1e-4 || status=1
done < "$runs"

step "NCCL (--dist-backend nccl) on --device $dev: one rank, against the run without it (bit for bit)"
# A communicator of one rank needs no mpirun (two ranks on one GPU are
# refused by NCCL): the real library's unique id, communicator and
# allreduce on the device's "nccl" stream, each group's sum (the identity)
# before its copy to the host. libnccl.so.2 from the loader's path, else from
# PyTorch's wheel (nvidia-nccl-cu*); skipped, saying so, when there is none.
nccl_lib=
if [ "$dev" = cuda ]; then
  if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
    nccl_lib=libnccl.so.2
  else
    nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -n "$nccl_lib" ] && [ -f "$nccl_lib" ] || nccl_lib=
  fi
fi
if [ "$dev" = cuda ] && [ -z "$nccl_lib" ]; then
  echo "nccl: skipped: no libnccl.so.2 on the loader's path or in PyTorch's wheel"
elif [ ! -f "$out/tiny-llama-streamed-$dev.jsonl" ]; then
  echo "nccl: skipped: no tiny-llama-streamed parity run above to compare with"
else
  flags=$(awk '$1 == "parity" && $2 == "tiny-llama-streamed" {for (i = 5; i <= NF; ++i) printf "%s ", $i}' "$runs")
  # shellcheck disable=SC2086
  if ! MTC_NCCL_LIBRARY=${nccl_lib:-libnccl.so.2} train "tiny-llama-nccl-$dev" "$dev" tiny-llama-streamed.mtb $flags --dist-backend nccl; then
    echo "nccl: the --dist-backend nccl run failed ($out/tiny-llama-nccl-$dev.log):"
    tail -3 "$out/tiny-llama-nccl-$dev.log"; status=1
  else
    grep '^dist backend:' "$out/tiny-llama-nccl-$dev.log"
    python3 scripts/gpu-check-report.py parity tiny-llama-nccl \
      "$out/tiny-llama-streamed-$dev.jsonl" "$out/tiny-llama-nccl-$dev.jsonl" 0 || status=1
  fi
fi

step "bf16 on --device $dev against the fp32 --device cpu runs above (within 1e-2)"
while read -r kind name bundle params flags; do
  [ "$kind" = bf16 ] || continue
  ref=${name/-bf16/} # the fp32 parity run of the same model and budget kind
  if [ ! -f "$out/$ref-cpu.jsonl" ]; then
    echo "$name: no fp32 --device cpu run $ref to compare with"; status=1
    continue
  fi
  # shellcheck disable=SC2086
  if ! train "$name-$dev" "$dev" "$bundle" $flags; then
    echo "$name: the --device $dev run failed ($out/$name-$dev.log):"
    tail -3 "$out/$name-$dev.log"; status=1; continue
  fi
  python3 scripts/gpu-check-report.py parity "$name" \
    "$out/$ref-cpu.jsonl" "$out/$name-$dev.jsonl" 1e-2 || status=1
done < "$runs"

step "training throughput: mtc-run --device $dev (fp32 and bf16 bundles; median of steps 2-5)"
python3 scripts/gpu-check-report.py peak "$gpu"
avail=$(awk '/^MemAvailable:/ {printf "%d", $2 * 1024}' /proc/meminfo)
while read -r kind name bundle params flags; do
  [ "$kind" = throughput ] || continue
  need=$(python3 scripts/gpu-check-report.py hostneed "$params" ".gpu/bundles/$bundle")
  if [ "$need" -gt "$avail" ]; then
    echo "$name: skipped: it needs $((need / 1000000000)) GB of host memory" \
      "(the state, 12 or 16 B/param x $params, the plan's host buffers, an" \
      "eighth more for the rest), $((avail / 1000000000)) GB are available"
    continue
  fi
  # shellcheck disable=SC2086
  if ! train "$name" "$dev" "$bundle" $flags; then
    echo "$name: failed ($out/$name.log):"; tail -3 "$out/$name.log"; status=1
    continue
  fi
  python3 scripts/gpu-check-report.py throughput "$name" "$params" "$gpu" \
    ".gpu/bundles/$bundle" "$out/$name.jsonl" || status=1
done < "$runs"

step "the same model in PyTorch eager on the GPU (bench/gpu_peer.py)"
while read -r kind name bundle params flags; do
  [ "$kind" = peer ] || continue
  # shellcheck disable=SC2086
  python3 bench/gpu_peer.py --gpu-name "$gpu" $flags 2>&1 | tee "$out/peer-$name.log"
  rc=${PIPESTATUS[0]}
  # 3: no PyTorch with CUDA here (a dry run); not a failure of the check.
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "gpu-check: peer $name exited $rc"; status=1; }
done < "$runs"
echo
[ $status = 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: some steps FAILED"
exit $status
