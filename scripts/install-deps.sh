#!/usr/bin/env bash
# Installs the Debian packages mtc builds and tests with. Idempotent: packages
# already present are skipped, so a second run does nothing and needs no network.
# Only apt is used (Debian 12 "bookworm"; LLVM/MLIR 22 come from its security suite).
set -euo pipefail

LLVM_MAJOR=22
PKGS=(
  build-essential cmake ninja-build ccache git python3
  "llvm-${LLVM_MAJOR}-dev" "llvm-${LLVM_MAJOR}-tools" "libmlir-${LLVM_MAJOR}-dev" "mlir-${LLVM_MAJOR}-tools"
  "clang-${LLVM_MAJOR}" "libclang-rt-${LLVM_MAJOR}-dev" "lld-${LLVM_MAJOR}"
  antlr4 libantlr4-runtime-dev
  libgtest-dev libopenblas-dev nlohmann-json3-dev
  openmpi-bin libopenmpi-dev
)
# Open MPI builds libmtc-mpi.so and runs the data-parallel tests (mpirun -np
# 2); mtc and mtc-run never link it (docs/distributed.md).
# Not needed: zlib, zstd, libedit, libxml2 and curl headers (LLVM's CMake
# package looks for them but mtc links only the shared libLLVM and libMLIR,
# which carry their own dependencies), fmt (unused).

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
