// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-initializer.mt:6:18: error: unknown initializer 'gaussian'; expected zeros, ones, normal(std), scaled_normal(std) or uniform(lo, hi)
// CHECK: {{.*}}syntax-initializer.mt:7:18: error: initializer 'uniform' takes 2 arguments, got 1
// CHECK: {{.*}}syntax-initializer.mt:8:23: error: initializer 'ones' takes 0 arguments, got 1
model M {
  param a: [4] = gaussian(0.02)
  param b: [4] = uniform(0.1)
  param c: [4] bf16 = ones(1)
  forward(x: [B, S, 4]) -> [B, S, 4] { return x }
}
