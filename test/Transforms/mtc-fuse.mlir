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

// -----

// A reduction over the last axis ends its producer's chain: sum(exp(x - c))
// is one region with a [B, S] result (iteration shape [B, S, 64]).
// CHECK-LABEL: func.func @sum_exp
// CHECK: %[[F:.*]] = mt.fused(%{{.*}}, %{{.*}}) : (!mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>) -> !mt.tensor<[B, S], f32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mt.sub
// CHECK-NEXT: mt.exp
// CHECK-NEXT: mt.sum %{{.*}} axis = 2 :
// CHECK-NEXT: mt.yield
// CHECK: return %[[F]]
func.func @sum_exp(%x: !mt.tensor<[B, S, 64], f32>, %c: !mt.tensor<[64], f32>) -> !mt.tensor<[B, S], f32> {
  %d = mt.sub %x, %c : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32> -> !mt.tensor<[B, S, 64], f32>
  %e = mt.exp %d : !mt.tensor<[B, S, 64], f32>
  %s = mt.sum %e axis = 2 : !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S], f32>
  return %s : !mt.tensor<[B, S], f32>
}

// -----

// A hand-written RMSNorm: the row ops after the mean (+ eps, rsqrt) join its
// region, whose result is the [B, S, 1] row value; the multiply that
// broadcasts it back over [B, S, 64] does not (a region never reads its own
// row values per element). It starts a second region with the weight, which
// reads the [B, S, 1] value per row.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[B, S, 64], f32>, %[[W:.*]]: !mt.tensor<[64], f32>)
// CHECK: %[[R:.*]] = mt.fused(%[[X]]) : (!mt.tensor<[B, S, 64], f32>) -> !mt.tensor<[B, S, 1], f32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mt.square
// CHECK-NEXT: mt.mean %{{.*}} axis = 2 keepdim
// CHECK-NEXT: mt.constant 1.000000e-05
// CHECK-NEXT: mt.add
// CHECK-NEXT: mt.rsqrt
// CHECK-NEXT: mt.yield
// CHECK: %[[Y:.*]] = mt.fused(%[[X]], %[[R]], %[[W]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mt.mul
// CHECK-NEXT: mt.mul
// CHECK-NEXT: mt.yield
// CHECK-NOT: mt.constant
// CHECK: return %[[Y]]
func.func @rmsnorm(%x: !mt.tensor<[B, S, 64], f32>, %w: !mt.tensor<[64], f32>) -> !mt.tensor<[B, S, 64], f32> {
  %q = mt.square %x : !mt.tensor<[B, S, 64], f32>
  %m = mt.mean %q axis = 2 keepdim : !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S, 1], f32>
  %eps = mt.constant 1.0e-05 : !mt.tensor<[], f32>
  %v = mt.add %m, %eps : !mt.tensor<[B, S, 1], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 1], f32>
  %r = mt.rsqrt %v : !mt.tensor<[B, S, 1], f32>
  %y = mt.mul %x, %r : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[B, S, 1], f32> -> !mt.tensor<[B, S, 64], f32>
  %z = mt.mul %y, %w : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32> -> !mt.tensor<[B, S, 64], f32>
  return %z : !mt.tensor<[B, S, 64], f32>
}

// -----

// Softmax by hand: the max stays alone (one op), x - max, exp and the sum
// form a region with two results (the exps and the row sums), and the final
// division, which broadcasts the sums back, stays outside it.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[M:.*]] = mt.max
// CHECK: %[[F:.*]]:2 = mt.fused(%{{.*}}, %[[M]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mt.sub
// CHECK-NEXT: mt.exp
// CHECK-NEXT: mt.sum
// CHECK-NEXT: mt.yield
// CHECK: mt.div %[[F]]#0, %[[F]]#1
// ONE-LABEL: func.func @softmax
// ONE-COUNT-3: mt.fused
// ONE-NOT: mt.fused
func.func @softmax(%x: !mt.tensor<[B, S, 64], f32>) -> !mt.tensor<[B, S, 64], f32> {
  %m = mt.max %x axis = 2 keepdim : !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S, 1], f32>
  %d = mt.sub %x, %m : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[B, S, 1], f32> -> !mt.tensor<[B, S, 64], f32>
  %e = mt.exp %d : !mt.tensor<[B, S, 64], f32>
  %s = mt.sum %e axis = 2 keepdim : !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S, 1], f32>
  %p = mt.div %e, %s : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[B, S, 1], f32> -> !mt.tensor<[B, S, 64], f32>
  return %p : !mt.tensor<[B, S, 64], f32>
}

// -----

// Several reductions of one chain share its region; a row op may read two
// of them and an outside row-shaped value ([B] here, read per row).
// CHECK-LABEL: func.func @two_reductions
// ONE-LABEL: func.func @two_reductions
// CHECK: %[[F:.*]]:2 = mt.fused(%{{.*}}, %{{.*}}) : (!mt.tensor<[B, 16], f32>, !mt.tensor<[B], f32>) -> (!mt.tensor<[B], f32>, !mt.tensor<[B], f32>)
// CHECK: mt.sum
// CHECK: mt.max
// CHECK: mt.sub
// CHECK: mt.mul
// CHECK: mt.yield
func.func @two_reductions(%x: !mt.tensor<[B, 16], f32>, %o: !mt.tensor<[B], f32>) -> (!mt.tensor<[B], f32>, !mt.tensor<[B], f32>) {
  %t = mt.tanh %x : !mt.tensor<[B, 16], f32>
  %s = mt.sum %t axis = 1 : !mt.tensor<[B, 16], f32> -> !mt.tensor<[B], f32>
  %m = mt.max %t axis = 1 : !mt.tensor<[B, 16], f32> -> !mt.tensor<[B], f32>
  %d = mt.sub %s, %m : !mt.tensor<[B], f32>, !mt.tensor<[B], f32> -> !mt.tensor<[B], f32>
  %p = mt.mul %d, %o : !mt.tensor<[B], f32>, !mt.tensor<[B], f32> -> !mt.tensor<[B], f32>
  return %p, %m : !mt.tensor<[B], f32>, !mt.tensor<[B], f32>
}

// -----

// Not fused into the chain: a reduction over another axis, and one over a
// symbolic last axis (the kernels need a static row length).
// CHECK-LABEL: func.func @not_last_axis
// CHECK-NOT: mt.fused
// CHECK: return
// ONE-LABEL: func.func @not_last_axis
// ONE: mt.fused
// ONE-NEXT: ^bb0
// ONE-NEXT: mt.exp
// ONE-NEXT: mt.yield
// ONE: mt.sum %{{.*}} axis = 1 : !mt.tensor<[B, 8, 64], f32>
// ONE: mt.fused
// ONE-NEXT: ^bb0
// ONE-NEXT: mt.neg
// ONE-NEXT: mt.yield
func.func @not_last_axis(%x: !mt.tensor<[B, 8, 64], f32>) -> !mt.tensor<[B, 64], f32> {
  %e = mt.exp %x : !mt.tensor<[B, 8, 64], f32>
  %s = mt.sum %e axis = 1 : !mt.tensor<[B, 8, 64], f32> -> !mt.tensor<[B, 64], f32>
  %n = mt.neg %s : !mt.tensor<[B, 64], f32>
  return %n : !mt.tensor<[B, 64], f32>
}

// -----

// CHECK-LABEL: func.func @symbolic_last_axis
// CHECK: %[[F:.*]] = mt.fused
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mt.exp
// CHECK-NEXT: mt.log
// CHECK-NEXT: mt.yield
// CHECK: mt.sum %[[F]] axis = 1
func.func @symbolic_last_axis(%x: !mt.tensor<[B, S], f32>) -> !mt.tensor<[B], f32> {
  %e = mt.exp %x : !mt.tensor<[B, S], f32>
  %l = mt.log %e : !mt.tensor<[B, S], f32>
  %s = mt.sum %l axis = 1 : !mt.tensor<[B, S], f32> -> !mt.tensor<[B], f32>
  return %s : !mt.tensor<[B], f32>
}
