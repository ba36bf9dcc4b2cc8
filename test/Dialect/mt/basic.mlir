// RUN: mtc-opt %s | FileCheck %s
// RUN: mtc-opt %s | mtc-opt | FileCheck %s
// RUN: mtc-opt %s --mlir-print-op-generic | mtc-opt | FileCheck %s
// RUN: mtc-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// A small model using every op of the dialect; printing and re-parsing it must
// give the same IR.

// CHECK-LABEL: mt.model @Tiny
// CHECK-SAME: config = {dim = 16 : i64, eps = 1.000000e-05 : f64}
mt.model @Tiny attributes {config = {dim = 16 : i64, eps = 1.0e-05 : f64}} {
  // CHECK: mt.param @tok_emb : !mt.tensor<[32, 16], f32> init normal [2.000000e-02]
  mt.param @tok_emb : !mt.tensor<[32, 16], f32> init normal [0.02]
  // CHECK: mt.param @final_norm : !mt.tensor<[16], bf16> init ones
  mt.param @final_norm : !mt.tensor<[16], bf16> init ones

  // CHECK: mt.layer @Block x 2
  mt.layer @Block x 2 {
    mt.param @norm : !mt.tensor<[16], f32> init zeros
    mt.param @wqkv : !mt.tensor<[16, 48], f32> init uniform [-1.000000e-01, 1.000000e-01]
    mt.param @wo : !mt.tensor<[16, 16], f32> init scaled_normal [2.000000e-02]
    mt.param @router : !mt.tensor<[16, 4], f32> init normal [2.000000e-02]
    // CHECK: mt.expert @FFN x 4
    mt.expert @FFN x 4 {
      mt.param @w1 : !mt.tensor<[16, 32], f32> init normal [2.000000e-02]
      mt.param @w2 : !mt.tensor<[32, 16], f32> init normal [2.000000e-02]
      func.func @forward(%t: !mt.tensor<[T, 16], f32>) -> !mt.tensor<[T, 16], f32> {
        %w1 = mt.param_ref @w1 : !mt.tensor<[16, 32], f32>
        %w2 = mt.param_ref @w2 : !mt.tensor<[32, 16], f32>
        %h = mt.matmul %t, %w1 : !mt.tensor<[T, 16], f32>, !mt.tensor<[16, 32], f32> -> !mt.tensor<[T, 32], f32>
        // CHECK: mt.gelu %{{.*}} approximate = "tanh"
        %g = mt.gelu %h approximate = "tanh" : !mt.tensor<[T, 32], f32>
        %o = mt.matmul %g, %w2 : !mt.tensor<[T, 32], f32>, !mt.tensor<[32, 16], f32> -> !mt.tensor<[T, 16], f32>
        func.return %o : !mt.tensor<[T, 16], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 16], f32>) -> !mt.tensor<[B, S, 16], f32> {
      %norm = mt.param_ref @norm : !mt.tensor<[16], f32>
      %wqkv = mt.param_ref @wqkv : !mt.tensor<[16, 48], f32>
      %wo = mt.param_ref @wo : !mt.tensor<[16, 16], f32>
      %router = mt.param_ref @router : !mt.tensor<[16, 4], f32>
      // CHECK: mt.rmsnorm %{{.*}}, %{{.*}} eps = 1.000000e-05 offset = 1.000000e+00
      %h = mt.rmsnorm %x, %norm eps = 1.0e-05 offset = 1.0 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16], f32> -> !mt.tensor<[B, S, 16], f32>
      %qkv = mt.matmul %h, %wqkv : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 48], f32> -> !mt.tensor<[B, S, 48], f32>
      // CHECK: mt.split %{{.*}} axis = 2 sizes = [16, 16, 16]
      %q, %k, %v = mt.split %qkv axis = 2 sizes = [16, 16, 16] : !mt.tensor<[B, S, 48], f32> -> !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S, 16], f32>
      %q4 = mt.reshape %q : !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[B, S, 4, 4], f32>
      %k4 = mt.reshape %k : !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[B, S, 4, 4], f32>
      %v4 = mt.reshape %v : !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[B, S, 4, 4], f32>
      // CHECK: mt.rope %{{.*}} theta = 1.000000e+04 fraction = 5.000000e-01
      %qr = mt.rope %q4 theta = 1.0e+04 fraction = 0.5 : !mt.tensor<[B, S, 4, 4], f32>
      // CHECK: mt.rope {{.*}}scaling = "llama3"
      %kr = mt.rope %k4 theta = 5.0e+05 fraction = 1.0 {scaling = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : !mt.tensor<[B, S, 4, 4], f32>
      // CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} causal window = 8 softcap = 5.000000e+01 scale = 0.000000e+00
      %a = mt.attention %qr, %kr, %v4 causal window = 8 softcap = 50.0 scale = 0.0 : !mt.tensor<[B, S, 4, 4], f32>, !mt.tensor<[B, S, 4, 4], f32>, !mt.tensor<[B, S, 4, 4], f32> -> !mt.tensor<[B, S, 4, 4], f32>
      %a2 = mt.reshape %a : !mt.tensor<[B, S, 4, 4], f32> -> !mt.tensor<[B, S, 16], f32>
      %o = mt.matmul %a2, %wo : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 16], f32> -> !mt.tensor<[B, S, 16], f32>
      %r = mt.add %x, %o : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[B, S, 16], f32>
      // CHECK: mt.moe %{{.*}}, %{{.*}} expert @FFN top_k = 2 normalize aux_loss = 1.000000e-02
      %m = mt.moe %r, %router expert @FFN top_k = 2 normalize aux_loss = 0.01 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 4], f32> -> !mt.tensor<[B, S, 16], f32>
      %y = mt.add %r, %m : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[B, S, 16], f32>
      func.return %y : !mt.tensor<[B, S, 16], f32>
    }
  }

  // CHECK: func.func @forward(%{{.*}}: !mt.tensor<[B, S], i32>, %{{.*}}: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32>
  func.func @forward(%tokens: !mt.tensor<[B, S], i32>, %targets: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %emb = mt.param_ref @tok_emb : !mt.tensor<[32, 16], f32>
    %fn = mt.param_ref @final_norm : !mt.tensor<[16], bf16>
    %x = mt.embedding %tokens, %emb : !mt.tensor<[B, S], i32>, !mt.tensor<[32, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    // CHECK: mt.constant 4.000000e+00 : !mt.tensor<[], f32>
    %c = mt.constant 4.0 : !mt.tensor<[], f32>
    %xs = mt.mul %x, %c : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 16], f32>
    // CHECK: mt.apply_layers @Block[0, 1] %{{.*}} : !mt.tensor<[B, S, 16], f32>
    %h0 = mt.apply_layers @Block[0, 1] %xs : !mt.tensor<[B, S, 16], f32>
    %h1 = mt.apply_layers @Block[1, 1] %h0 : !mt.tensor<[B, S, 16], f32>
    %n = mt.layernorm %h1, %fn eps = 1.0e-05 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16], bf16> -> !mt.tensor<[B, S, 16], f32>
    // CHECK: mt.transpose %{{.*}} perm = [1, 0]
    %et = mt.transpose %emb perm = [1, 0] : !mt.tensor<[32, 16], f32> -> !mt.tensor<[16, 32], f32>
    %logits = mt.matmul %n, %et : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 32], f32> -> !mt.tensor<[B, S, 32], f32>
    %capped = mt.softcap %logits cap = 30.0 : !mt.tensor<[B, S, 32], f32>
    // Exercise the remaining elementwise and reduction ops.
    %e = mt.exp %capped : !mt.tensor<[B, S, 32], f32>
    %l = mt.log %e : !mt.tensor<[B, S, 32], f32>
    %s1 = mt.silu %l : !mt.tensor<[B, S, 32], f32>
    %s2 = mt.relu %s1 : !mt.tensor<[B, S, 32], f32>
    %s3 = mt.sigmoid %s2 : !mt.tensor<[B, S, 32], f32>
    %s4 = mt.tanh %s3 : !mt.tensor<[B, S, 32], f32>
    %s5 = mt.square %s4 : !mt.tensor<[B, S, 32], f32>
    %s6 = mt.sqrt %s5 : !mt.tensor<[B, S, 32], f32>
    %s7 = mt.rsqrt %s6 : !mt.tensor<[B, S, 32], f32>
    %s8 = mt.neg %s7 : !mt.tensor<[B, S, 32], f32>
    // unary_grad's kind is a function of lib/Bundle/UnaryFns.def, a bare
    // keyword (generic form: #mt.unary_fn<...>).
    // CHECK: mt.unary_grad gelu_tanh %{{.*}}, %{{.*}} param = 0.000000e+00 : !mt.tensor<[B, S, 32], f32>
    // GENERIC: "mt.unary_grad"({{.*}}) <{kind = #mt.unary_fn<gelu_tanh>, param = 0.000000e+00 : f64}>
    %ug = mt.unary_grad gelu_tanh %s7, %s8 param = 0.0 : !mt.tensor<[B, S, 32], f32>
    // CHECK: mt.unary_grad softcap %{{.*}}, %{{.*}} param = 3.000000e+01
    %ug2 = mt.unary_grad softcap %ug, %s8 param = 30.0 : !mt.tensor<[B, S, 32], f32>
    // CHECK: mt.relu2 %{{.*}} : !mt.tensor<[B, S, 32], f32>
    %r2 = mt.relu2 %ug2 : !mt.tensor<[B, S, 32], f32>
    // CHECK: mt.unary_grad relu2 %{{.*}}, %{{.*}} param = 0.000000e+00
    %ug3 = mt.unary_grad relu2 %r2, %s8 param = 0.0 : !mt.tensor<[B, S, 32], f32>
    %d = mt.div %s8, %c : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 32], f32>
    %sb = mt.sub %d, %capped : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, S, 32], f32>
    %sm = mt.softmax %sb axis = 2 : !mt.tensor<[B, S, 32], f32>
    // CHECK: mt.sum %{{.*}} axis = 2 keepdim
    %sum = mt.sum %sm axis = 2 keepdim : !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, S, 1], f32>
    %mx = mt.max %sm axis = 2 : !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, S], f32>
    %mn = mt.mean %sm axis = 1 : !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, 32], f32>
    %sl = mt.slice %sm axis = 2 start = 0 end = 16 : !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, S, 16], f32>
    %sr = mt.slice %sm axis = 2 start = 16 end = 32 : !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, S, 16], f32>
    // The first S rows of a static table (learned positions) and its VJP.
    // CHECK: mt.slice %{{.*}} axis = 0 start = 0 end = S : !mt.tensor<[32, 16], f32> -> !mt.tensor<[S, 16], f32>
    %pos = mt.slice %emb axis = 0 start = 0 end = S : !mt.tensor<[32, 16], f32> -> !mt.tensor<[S, 16], f32>
    // CHECK: mt.pad %{{.*}} axis = 0 start = 0 end = S : !mt.tensor<[S, 16], f32> -> !mt.tensor<[32, 16], f32>
    %posg = mt.pad %pos axis = 0 start = 0 end = S : !mt.tensor<[S, 16], f32> -> !mt.tensor<[32, 16], f32>
    // CHECK: mt.concat %{{.*}}, %{{.*}} axis = 2
    %cc = mt.concat %sr, %sl axis = 2 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[B, S, 32], f32>
    %all = mt.add %cc, %sum : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S, 1], f32> -> !mt.tensor<[B, S, 32], f32>
    // CHECK: mt.cross_entropy %{{.*}}, %{{.*}} ignore_index = -1
    %loss = mt.cross_entropy %all, %targets ignore_index = -1 : !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    func.return %loss : !mt.tensor<[], f32>
  }
}
