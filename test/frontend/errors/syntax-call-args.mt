// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-call-args.mt:6:31: error: positional argument after named argument 'axis' in call to 'softmax'
// CHECK: {{.*}}syntax-call-args.mt:7:43: error: duplicate argument 'causal' in call to 'attention'
model M {
  forward(x: [B, S, 4]) -> [B, S, 4] {
    y = softmax(x, axis = -1, 2)
    z = attention(x, x, x, causal = true, causal = false)
    return y
  }
}
