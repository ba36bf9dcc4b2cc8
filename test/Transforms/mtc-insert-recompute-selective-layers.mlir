// RUN: mtc-opt %s --mtc-autodiff="save=selective full-backward=true" --mtc-streaming-pipeline="batch=2 seq=4 micro-batches=2 checkpoints=host selective-layers=1" | FileCheck %s
// RUN: mtc-opt %s --mtc-autodiff="save=selective full-backward=true" --mtc-streaming-pipeline="batch=2 seq=4 micro-batches=2 checkpoints=host selective-layers=2" | FileCheck %s --check-prefix=ALL
// RUN: mtc-opt %s --mtc-autodiff="save=selective" --mtc-streaming-pipeline="batch=2 seq=4 micro-batches=2 checkpoints=host" | FileCheck %s --check-prefix=SELECTIVE
// RUN: mtc-opt %s --mtc-autodiff="save=input" --mtc-streaming-pipeline="batch=2 seq=4 micro-batches=2 checkpoints=host" | FileCheck %s --check-prefix=FULL
// RUN: not mtc-opt %s --mtc-autodiff="save=selective full-backward=true" --mtc-streaming-pipeline="batch=2 seq=4 selective-layers=3" 2>&1 | FileCheck %s --check-prefix=PAST
// RUN: not mtc-opt %s --mtc-autodiff="save=selective" --mtc-streaming-pipeline="batch=2 seq=4 selective-layers=1" 2>&1 | FileCheck %s --check-prefix=NO-FULL
// RUN: not mtc-opt %s --mtc-autodiff="save=input" --mtc-streaming-pipeline="batch=2 seq=4 selective-layers=1" 2>&1 | FileCheck %s --check-prefix=POLICY

// mtc-insert-recompute selective-layers=S: mixed recomputation. The first S
// layer instances keep their selective checkpoints (input + the matmul
// result %h), the others their input alone (they run @backward_full). At
// [2, 4] an activation [B, S, 8] f32 is 2 * 4 * 8 * 4 = 256 bytes, so a
// selective checkpoint is 512 bytes and a full one 256; with 2 instances and
// 2 micro-batches the host checkpoints are 2 x 512 + 2 x 256 = 1536 bytes
// for S = 1, strictly between full's 1024 and selective's 2048.
mt.model @M {
  mt.layer @L x 2 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %n = mt.mul %x, %x : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %h = mt.matmul %n, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    %h = mt.apply_layers @L[0, 2] %x : !mt.tensor<[B, S, 8], f32>
    %s = mt.sum %h axis = 2 : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S], f32>
    %m = mt.mean %s axis = 1 : !mt.tensor<[B, S], f32> -> !mt.tensor<[B], f32>
    %l = mt.mean %m axis = 0 : !mt.tensor<[B], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: stream.step @M recompute = selective checkpoints = host
// CHECK-SAME:    selective_layers = 1 : i64
// CHECK:         stream.buffer @checkpoints kind = checkpoints space = device bytes = 1024
// CHECK:         stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 1536

// S = N is the pure selective plan: no attribute.
// ALL-LABEL: stream.step @M recompute = selective
// ALL-NOT:     selective_layers
// ALL:         stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 2048

// SELECTIVE: stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 2048
// FULL:      stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 1024

// PAST: 'stream.step' op selective-layers=3 exceeds the 2 layer instances of the step
// NO-FULL: 'stream.step' op selective-layers=1, but layer @L has no @backward_full for the instances that keep only their input; differentiate with mtc-autodiff save=selective full-backward=true
// POLICY: 'stream.step' op selective-layers=1 needs recompute=selective (the first instances keep selective checkpoints, the rest only their input), got recompute=full
