// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-two-models.mt:7:1: error: a file holds exactly one model
model M {
  forward(x: [B, S, 4]) -> [B, S, 4] { return x }
}

model N {
  forward(x: [B, S, 4]) -> [B, S, 4] { return x }
}
