// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-model-forward.mt:6:3: error: duplicate forward in model 'M'
// CHECK: {{.*}}syntax-model-forward.mt:5:3: note: the first forward is here
model M {
  forward(x: [B, S, 4]) -> [B, S, 4] { return x }
  forward(x: [B, S, 4]) -> [B, S, 4] { return x }
}
