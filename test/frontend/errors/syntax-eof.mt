// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// The model's closing '}' is missing: the error points just past the end.
// CHECK: {{.*}}syntax-eof.mt:8:4: error: unexpected end of file; expected '}' to close model 'M'
// CHECK: {{.*}}syntax-eof.mt:5:9: note: to match this '{'
model M {
  forward(t: [B, S] i32) -> [] {
    return t
  }
