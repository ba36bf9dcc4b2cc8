// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-bad-number.mt:5:22: error: invalid number '1e'
model M {
  config {
    dim = 256; eps = 1e
  }
}
