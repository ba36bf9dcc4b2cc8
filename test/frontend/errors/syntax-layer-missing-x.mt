// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-layer-missing-x.mt:4:15: error: unexpected '4'; expected 'x COUNT' after the name of layer 'Block'
model M {
  layer Block 4 {
    forward(x: [B, S, 4]) -> [B, S, 4] { return x }
  }
  forward(x: [B, S, 4]) -> [B, S, 4] { return Block(x) }
}
