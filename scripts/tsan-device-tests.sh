#!/usr/bin/env bash
# Builds the device tests alone (the conformance suite, CpuDevice's own tests,
# HostStore, Trace, with googletest from /usr/src/googletest) with
# -fsanitize=thread and runs them: a few minutes on 2 cores, against ~20 for
# the full ThreadSanitizer build of docs/testing.md. Any report fails the run.
#   scripts/tsan-device-tests.sh [OUT_DIR] [gtest flags...]
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=${1:-/tmp/mtc-tsan-device}
shift || true
CXX=${CXX:-/usr/lib/llvm-22/bin/clang++}
GTEST=/usr/src/googletest/googletest
FLAGS=(-std=gnu++17 -fsanitize=thread -O2 -g -fexceptions -frtti -I. -I"$GTEST/include" -I"$GTEST")
SOURCES=(
  runtime/device/CpuDevice.cpp runtime/device/Trace.cpp runtime/device/HostStore.cpp
  lib/Format/MappedFile.cpp lib/Support/Files.cpp lib/Support/JsonString.cpp
  test/unit/DeviceConformanceTest.cpp test/unit/CpuDeviceTest.cpp
  test/unit/TraceTest.cpp test/unit/HostStoreTest.cpp
  "$GTEST/src/gtest-all.cc" "$GTEST/src/gtest_main.cc"
)
mkdir -p "$OUT"
printf '%s\n' "${SOURCES[@]}" |
  xargs -P 2 -I{} sh -c '"$0" "$@" -c {} -o "'"$OUT"'/$(basename {}).o"' "$CXX" "${FLAGS[@]}"
OBJECTS=()
for f in "${SOURCES[@]}"; do OBJECTS+=("$OUT/$(basename "$f").o"); done
"$CXX" "${FLAGS[@]}" "${OBJECTS[@]}" -o "$OUT/device-tests" -lpthread
TSAN_OPTIONS="halt_on_error=1 abort_on_error=1 ${TSAN_OPTIONS:-}" \
  "$OUT/device-tests" "$@"
