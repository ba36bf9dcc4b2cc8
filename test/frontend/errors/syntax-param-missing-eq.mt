// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-param-missing-eq.mt:5:28: error: unexpected 'normal'; expected '='
// CHECK-NEXT: {{^}}  param tok_emb: [256, 64] normal(0.02)
model M {
  param tok_emb: [256, 64] normal(0.02)
  forward(x: [B, S] i32) -> [B, S, 64] { return embedding(x, tok_emb) }
}
