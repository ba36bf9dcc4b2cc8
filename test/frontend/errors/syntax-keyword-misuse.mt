// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// Keywords where they do not belong; recovery skips the bad line and goes on.
// CHECK: {{.*}}syntax-keyword-misuse.mt:8:5: error: unexpected 'return' in the config block; expected '}' or a name
// CHECK: {{.*}}syntax-keyword-misuse.mt:12:5: error: unexpected 'param' in the forward of model 'M'; expected '}' or a statement
// CHECK: 2 errors generated.
model M {
  config {
    return 4
    dim = 4
  }
  forward(x: [B, S, 4]) -> [B, S, 4] {
    param w: [dim] = ones
    return x
  }
}
