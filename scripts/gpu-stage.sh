#!/usr/bin/env bash
# scripts/gpu-stage.sh -- run HERE (the build machine) before a GPU session:
# builds the runtime-only binaries that scripts/gpu-check.sh runs and puts
# them, stripped, with the shared libraries a bare GPU machine may lack
# (OpenBLAS and its Fortran runtime, xz-compressed), under .gpu/ -- a folder
# git ignores (.gitignore), small enough to travel with the working tree.
#
#   scripts/gpu-stage.sh [RUNTIME_BUILD_DIR]     (default build-runtime)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-runtime}
targets="mtc-unittests mtc-cuda-tests mtc-cuda-nvrtc-tests mtc-bench-cuda"
[ -f "$build/build.ninja" ] || make build-runtime >/dev/null
cmake --build "$build" -j "$(nproc)" --target $targets
rm -rf .gpu && mkdir -p .gpu/bin
for t in $targets; do
  strip -o ".gpu/bin/$t" "$build/bin/$t"
done
libs=$(for t in $targets; do ldd "$build/bin/$t"; done |
  awk '/openblas|gfortran|quadmath/ {print $3}' | sort -u)
mkdir -p .gpu/lib.tmp
for l in $libs; do cp -L "$l" .gpu/lib.tmp/; done
tar -C .gpu/lib.tmp -cJf .gpu/lib.tar.xz .
rm -rf .gpu/lib.tmp
du -sh .gpu
