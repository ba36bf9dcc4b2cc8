// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-unterminated-comment.mt:5:3: error: unterminated block comment
// CHECK: 1 error generated.
model M {
  /* the forward
  forward(x: [B]) -> [B] { return x }
}
