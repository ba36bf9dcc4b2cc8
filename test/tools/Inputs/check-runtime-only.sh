#!/usr/bin/env bash
# check-runtime-only.sh BINARY MAX_BYTES -- the ctest `mtc-run-deps`: BINARY
# (bin/mtc-run) links no compiler library (ldd shows no libMLIR, libLLVM or
# ANTLR runtime) and is smaller than MAX_BYTES, so that it can be taken to a
# machine without the toolchain (issue 13: under 30 MB). Prints what it found.
set -euo pipefail
bin=$1 max=$2
[ -x "$bin" ] || { echo "FAIL: $bin is not an executable"; exit 1; }
deps=$(ldd "$bin")
bad=$(echo "$deps" | grep -iE 'libMLIR|libLLVM|antlr' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $bin links compiler libraries:"
  echo "$bad"
  exit 1
fi
size=$(stat -c %s "$bin")
if [ "$size" -ge "$max" ]; then
  echo "FAIL: $bin is $size bytes, not under $max"
  exit 1
fi
echo "ok: $bin: $size bytes (< $max), no libMLIR/libLLVM/antlr; links:"
echo "$deps" | awk '{print "  " $1}'
