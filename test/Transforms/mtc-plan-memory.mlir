// RUN: mtc-opt %s -split-input-file --mtc-plan-memory | FileCheck %s
// RUN: mtc-opt %s -split-input-file --mtc-plan-memory="budget=64KiB" | FileCheck %s --check-prefix=BUDGET

// mtc-plan-memory replaces the step's buffers with the memory plan: each
// device buffer at the next multiple of 256 bytes, device_peak the end of the
// last one, device_budget the budget option or else the step's own. For this
// model at [2, 4] with M = 2 micro-batches and two weight slots:
//   model.weights, model.grads   @emb: 16 x 8 x 4 = 512
//   weights.0/1, grads.0/1       one Block instance, @w: 8 x 8 x 4 = 256
//   activations                  a layer's input and output: 2 x M x 256
//   checkpoints                  4 instances x M x 256 (checkpoint_bytes)
//   stage                        @forward_backward's other values: M x 4864
//   workspace                    the largest layer function's values, by
//                                liveness: 1024
mt.model @Tiny {
  mt.param @emb : !mt.tensor<[16, 8], f32> init normal [0.02]
  mt.layer @Block x 4 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"} {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dh = mt.unary_grad silu %h, %dy param = 0.0 : !mt.tensor<[B, S, 8], f32>
      %wt = mt.transpose %w perm = [1, 0] : !mt.tensor<[8, 8], f32> -> !mt.tensor<[8, 8], f32>
      %dxh = mt.matmul %dh, %wt : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dx = mt.add %dy, %dxh : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dw = mt.weight_grad %x, %dh : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[8, 8], f32>
      mt.param_grad @w, %dw : !mt.tensor<[8, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
  func.func @forward_backward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    %one = mt.constant 1.0 : !mt.tensor<[], f32>
    %dl = mt.cross_entropy_grad %l, %u, %one ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 16], f32>
    %dh = mt.matmul %dl, %e : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %det = mt.weight_grad %h, %dl : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[8, 16], f32>
    %dx = mt.apply_layers_grad @Block[0, 4] %dh : !mt.tensor<[B, S, 8], f32>
    %de1 = mt.embedding_grad %t, %dx : !mt.tensor<[B, S], i32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[16, 8], f32>
    %de2 = mt.transpose %det perm = [1, 0] : !mt.tensor<[8, 16], f32> -> !mt.tensor<[16, 8], f32>
    %de = mt.add %de1, %de2 : !mt.tensor<[16, 8], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[16, 8], f32>
    mt.param_grad @emb, %de : !mt.tensor<[16, 8], f32>
    return %loss : !mt.tensor<[], f32>
  }
}
stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
  stream.buffer @stale kind = stage space = device bytes = 64 offset = 0
  stream.load_model_weights
  stream.stage [0, 2)
  stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 256 : i64} {
    stream.optimizer_update ahead = 1
    stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
    stream.save to = device
    stream.wait_weights event = "Block.forward.weights"
    stream.compute forward
  }
  stream.stage [3, 10)
  stream.layers @Block[0, 4] backward op_index = 10 attributes {checkpoint_bytes = 256 : i64} {
    stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
    stream.restore from = device
    stream.wait_weights event = "Block.backward.weights"
    stream.compute backward
    stream.grad_return stream = d2h
  }
  stream.stage [11, 15)
  stream.return_model_grads
}

// CHECK-LABEL: stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, device_budget = 0 : i64, device_peak = 15872 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, seq = 4 : i64} {
// CHECK-NEXT:    stream.buffer @model.weights kind = model_weights space = device bytes = 512 offset = 0
// CHECK-NEXT:    stream.buffer @model.grads kind = model_grads space = device bytes = 512 offset = 512
// CHECK-NEXT:    stream.buffer @weights.0 kind = weights space = device bytes = 256 offset = 1024
// CHECK-NEXT:    stream.buffer @weights.1 kind = weights space = device bytes = 256 offset = 1280
// CHECK-NEXT:    stream.buffer @grads.0 kind = grads space = device bytes = 256 offset = 1536
// CHECK-NEXT:    stream.buffer @grads.1 kind = grads space = device bytes = 256 offset = 1792
// CHECK-NEXT:    stream.buffer @activations kind = activations space = device bytes = 1024 offset = 2048
// CHECK-NEXT:    stream.buffer @checkpoints kind = checkpoints space = device bytes = 2048 offset = 3072
// CHECK-NEXT:    stream.buffer @stage kind = stage space = device bytes = 9728 offset = 5120
// CHECK-NEXT:    stream.buffer @workspace kind = workspace space = device bytes = 1024 offset = 14848
// CHECK-NEXT:    stream.load_model_weights
// CHECK-NOT:     stream.buffer

// BUDGET-LABEL: stream.step @Tiny
// BUDGET-SAME:    device_budget = 65536 : i64, device_peak = 15872 : i64

// -----

// Host checkpoints with M > 1: the boundary activations wait in host memory
// too (activations.host: M x 256); the device keeps two input and two output
// activation slots (4 x 256) and two checkpoint staging slots (2 x 256). The
// model-level values that cross a layer loop wait there too (stage.host: M x
// 1536, the embedding output, the loops' results, the loss gradient and the
// head's weight gradient, which the tied embedding's gradient adds after the
// backward loop); the device keeps one segment's slot: the loss segment,
// 256 in + 768 out + 2496 of ops and target ids = 3520. The budget is the
// step's.
mt.model @Tiny {
  mt.param @emb : !mt.tensor<[16, 8], f32> init normal [0.02]
  mt.layer @Block x 4 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"} {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dh = mt.unary_grad silu %h, %dy param = 0.0 : !mt.tensor<[B, S, 8], f32>
      %wt = mt.transpose %w perm = [1, 0] : !mt.tensor<[8, 8], f32> -> !mt.tensor<[8, 8], f32>
      %dxh = mt.matmul %dh, %wt : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dx = mt.add %dy, %dxh : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dw = mt.weight_grad %x, %dh : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[8, 8], f32>
      mt.param_grad @w, %dw : !mt.tensor<[8, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
  func.func @forward_backward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    %one = mt.constant 1.0 : !mt.tensor<[], f32>
    %dl = mt.cross_entropy_grad %l, %u, %one ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 16], f32>
    %dh = mt.matmul %dl, %e : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %det = mt.weight_grad %h, %dl : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[8, 16], f32>
    %dx = mt.apply_layers_grad @Block[0, 4] %dh : !mt.tensor<[B, S, 8], f32>
    %de1 = mt.embedding_grad %t, %dx : !mt.tensor<[B, S], i32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[16, 8], f32>
    %de2 = mt.transpose %det perm = [1, 0] : !mt.tensor<[8, 16], f32> -> !mt.tensor<[16, 8], f32>
    %de = mt.add %de1, %de2 : !mt.tensor<[16, 8], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[16, 8], f32>
    mt.param_grad @emb, %de : !mt.tensor<[16, 8], f32>
    return %loss : !mt.tensor<[], f32>
  }
}
stream.step @Tiny recompute = full checkpoints = host attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 65536 : i64, device_peak = 0 : i64} {
  stream.load_model_weights
  stream.stage [0, 2)
  stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 256 : i64} {
    stream.optimizer_update ahead = 1
    stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
    stream.save to = host
    stream.wait_weights event = "Block.forward.weights"
    stream.compute forward
  }
  stream.stage [3, 10)
  stream.layers @Block[0, 4] backward op_index = 10 attributes {checkpoint_bytes = 256 : i64} {
    stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
    stream.restore from = host
    stream.wait_weights event = "Block.backward.weights"
    stream.compute backward
    stream.grad_return stream = d2h
  }
  stream.stage [11, 15)
  stream.return_model_grads
}

// CHECK-LABEL: stream.step @Tiny recompute = full checkpoints = host attributes {batch = 2 : i64, device_budget = 65536 : i64, device_peak = 8192 : i64,
// CHECK:         stream.buffer @activations kind = activations space = device bytes = 1024 offset = 2048
// CHECK-NEXT:    stream.buffer @activations.host kind = activations space = host bytes = 512{{$}}
// CHECK-NEXT:    stream.buffer @checkpoints kind = checkpoints space = device bytes = 512 offset = 3072
// CHECK-NEXT:    stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 2048{{$}}
// CHECK-NEXT:    stream.buffer @stage kind = stage space = device bytes = 3520 offset = 3584
// CHECK-NEXT:    stream.buffer @stage.host kind = stage space = host bytes = 3072{{$}}
// CHECK-NEXT:    stream.buffer @workspace kind = workspace space = device bytes = 1024 offset = 7168
