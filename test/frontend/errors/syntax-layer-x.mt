// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// The `x` of `layer NAME x COUNT` is an ordinary identifier checked by the
// parser, so `x` stays usable as a variable name.
// CHECK: {{.*}}syntax-layer-x.mt:7:15: error: expected 'x' after layer name 'Block', found 'y' (layer NAME x COUNT)
// CHECK: 1 error generated.
model M {
  layer Block y 4 {
    forward(x: [B, S, 4]) -> [B, S, 4] { x = x * 2; return x }
  }
  forward(x: [B, S, 4]) -> [B, S, 4] { return Block(x) }
}
