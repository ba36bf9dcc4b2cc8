// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-no-forward.mt:5:7: error: model 'M' has no forward
// CHECK: {{.*}}syntax-no-forward.mt:7:9: error: layer 'Block' has no forward
// CHECK: {{.*}}syntax-no-forward.mt:9:12: error: expert 'E' has no forward
model M {
  param w: [4] = ones
  layer Block x 2 {
    param v: [4] = zeros
    expert E x 4 {
      param u: [4] = zeros
    }
  }
}
