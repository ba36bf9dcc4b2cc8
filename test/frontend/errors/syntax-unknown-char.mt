// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-unknown-char.mt:7:15: error: unexpected character '$'
// CHECK-NEXT: {{^}}    n_heads = $8
// CHECK-NEXT: {{^}}              ^
model M {
  config {
    n_heads = $8
  }
}
