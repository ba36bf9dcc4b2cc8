// RUN: mtc-opt %s --mtc-fuse-linear-cross-entropy --split-input-file | FileCheck %s

// Untied head.
// CHECK-LABEL: func.func @untied
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[B, S, 8], f32>, %[[W:.*]]: !mt.tensor<[8, 32], f32>, %[[T:.*]]: !mt.tensor<[B, S], i32>)
// CHECK-NEXT: %[[L:.*]] = mt.linear_cross_entropy %[[X]], %[[W]], %[[T]] softcap = 0.000000e+00 ignore_index = -1
// CHECK-NEXT: return %[[L]]
func.func @untied(%x: !mt.tensor<[B, S, 8], f32>, %w: !mt.tensor<[8, 32], f32>, %t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
  %l = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 32], f32> -> !mt.tensor<[B, S, 32], f32>
  %c = mt.cross_entropy %l, %t ignore_index = -1 : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
  return %c : !mt.tensor<[], f32>
}

// -----

// Tied embedding with a final softcap: the transpose folds into the op.
// CHECK-LABEL: func.func @tied_softcap
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[B, S, 8], f32>, %[[E:.*]]: !mt.tensor<[32, 8], f32>, %[[T:.*]]: !mt.tensor<[B, S], i32>)
// CHECK-NEXT: %[[L:.*]] = mt.linear_cross_entropy %[[X]], %[[E]], %[[T]] transpose_weight softcap = 3.000000e+01 ignore_index = -100
// CHECK-NEXT: return %[[L]]
func.func @tied_softcap(%x: !mt.tensor<[B, S, 8], f32>, %e: !mt.tensor<[32, 8], f32>, %t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
  %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[32, 8], f32> -> !mt.tensor<[8, 32], f32>
  %l = mt.matmul %x, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 32], f32> -> !mt.tensor<[B, S, 32], f32>
  %s = mt.softcap %l cap = 30.0 : !mt.tensor<[B, S, 32], f32>
  %c = mt.cross_entropy %s, %t ignore_index = -100 : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
  return %c : !mt.tensor<[], f32>
}

// -----

// Logits used elsewhere, or a head with a bias, stay as they are.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: mt.linear_cross_entropy
// CHECK: mt.cross_entropy
// CHECK: mt.cross_entropy
func.func @kept(%x: !mt.tensor<[B, S, 8], f32>, %w: !mt.tensor<[8, 32], f32>, %b: !mt.tensor<[32], f32>, %t: !mt.tensor<[B, S], i32>) -> (!mt.tensor<[], f32>, !mt.tensor<[B, S, 32], f32>, !mt.tensor<[], f32>) {
  %l = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 32], f32> -> !mt.tensor<[B, S, 32], f32>
  %c = mt.cross_entropy %l, %t ignore_index = -1 : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
  %lb = mt.matmul %x, %w bias %b : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 32], f32>, !mt.tensor<[32], f32> -> !mt.tensor<[B, S, 32], f32>
  %cb = mt.cross_entropy %lb, %t ignore_index = -1 : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
  return %c, %l, %cb : !mt.tensor<[], f32>, !mt.tensor<[B, S, 32], f32>, !mt.tensor<[], f32>
}
