// RUN: mtc-opt %s --mtc-fuse --split-input-file | FileCheck %s
// RUN: mtc-opt %s --mtc-fuse="min-ops=1" --split-input-file | FileCheck %s --check-prefix=ONE

// A SwiGLU-style chain with a broadcast weight and a scalar constant: one
// region; the constant is copied into it, the [64] weight is an input.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[B, S, 64], f32>, %[[Y:.*]]: !mt.tensor<[B, S, 64], f32>, %[[W:.*]]: !mt.tensor<[64], f32>)
// CHECK: %[[F:.*]] = mt.fused(%[[X]], %[[Y]], %[[W]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: !mt.tensor<[B, S, 64], f32>, %[[B:.*]]: !mt.tensor<[B, S, 64], f32>, %[[C:.*]]: !mt.tensor<[64], f32>):
// CHECK-NEXT: %[[S:.*]] = mt.silu %[[A]]
// CHECK-NEXT: %[[M:.*]] = mt.mul %[[S]], %[[B]]
// CHECK-NEXT: %[[K:.*]] = mt.constant 5.000000e-01
// CHECK-NEXT: %[[H:.*]] = mt.mul %[[M]], %[[K]]
// CHECK-NEXT: %[[R:.*]] = mt.add %[[H]], %[[C]]
// CHECK-NEXT: mt.yield %[[R]]
// CHECK-NOT: mt.constant
// CHECK: return %[[F]]
func.func @chain(%x: !mt.tensor<[B, S, 64], f32>, %y: !mt.tensor<[B, S, 64], f32>, %w: !mt.tensor<[64], f32>) -> !mt.tensor<[B, S, 64], f32> {
  %s = mt.silu %x : !mt.tensor<[B, S, 64], f32>
  %m = mt.mul %s, %y : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S, 64], f32>
  %k = mt.constant 0.5 : !mt.tensor<[], f32>
  %h = mt.mul %m, %k : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 64], f32>
  %r = mt.add %h, %w : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32> -> !mt.tensor<[B, S, 64], f32>
  return %r : !mt.tensor<[B, S, 64], f32>
}

// -----

// A value used by a matmul between two elementwise ops: fusing across the
// matmul would form a cycle, so the chain is cut there.
// CHECK-LABEL: func.func @no_cycle
// CHECK: %[[E:[0-9]+]]:2 = mt.fused
// CHECK: mt.exp
// CHECK: mt.neg
// CHECK: mt.yield
// CHECK: %[[MM:.*]] = mt.matmul %[[E]]#0
// CHECK: mt.fused(%[[E]]#1, %[[MM]])
func.func @no_cycle(%x: !mt.tensor<[B, 8], f32>, %w: !mt.tensor<[8, 8], f32>) -> !mt.tensor<[B, 8], f32> {
  %e = mt.exp %x : !mt.tensor<[B, 8], f32>
  %n = mt.neg %e : !mt.tensor<[B, 8], f32>
  %mm = mt.matmul %e, %w : !mt.tensor<[B, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, 8], f32>
  %t = mt.tanh %n : !mt.tensor<[B, 8], f32>
  %r = mt.add %t, %mm : !mt.tensor<[B, 8], f32>, !mt.tensor<[B, 8], f32> -> !mt.tensor<[B, 8], f32>
  return %r : !mt.tensor<[B, 8], f32>
}

// -----

// Different iteration shapes are not mixed, an input that broadcasts in the
// middle ([B, 1, 8]) is not a suffix, and a lone op stays as it is unless
// min-ops=1.
// CHECK-LABEL: func.func @shapes
// CHECK-NOT: mt.fused
// CHECK: return
// ONE-LABEL: func.func @shapes
// ONE-COUNT-2: mt.fused
// ONE-NOT: mt.fused
func.func @shapes(%x: !mt.tensor<[B, S, 8], f32>, %v: !mt.tensor<[8], f32>, %m: !mt.tensor<[B, 1, 8], f32>) -> (!mt.tensor<[B, S, 8], f32>, !mt.tensor<[8], f32>) {
  %a = mt.exp %v : !mt.tensor<[8], f32>
  %b = mt.add %x, %a : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8], f32> -> !mt.tensor<[B, S, 8], f32>
  %c = mt.mul %b, %m : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, 1, 8], f32> -> !mt.tensor<[B, S, 8], f32>
  return %c, %a : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8], f32>
}

// -----

// Values used after the region become extra results.
// CHECK-LABEL: func.func @multi
// ONE-LABEL: func.func @multi
// CHECK: %[[F:.*]]:2 = mt.fused
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @multi(%x: !mt.tensor<[B, 4], f32>) -> (!mt.tensor<[B, 4], f32>, !mt.tensor<[B, 4], f32>) {
  %a = mt.sigmoid %x : !mt.tensor<[B, 4], f32>
  %b = mt.mul %a, %x : !mt.tensor<[B, 4], f32>, !mt.tensor<[B, 4], f32> -> !mt.tensor<[B, 4], f32>
  return %b, %a : !mt.tensor<[B, 4], f32>, !mt.tensor<[B, 4], f32>
}
