// RUN: mtc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{unknown symbolic dimension 'X' (expected B, S or T)}}
func.func private @f(!mt.tensor<[X, 4], f32>)

// -----

// expected-error @+1 {{element type must be f32, bf16 or i32, got 'i64'}}
func.func private @f(!mt.tensor<[4], i64>)

// -----

func.func @f(%a: !mt.tensor<[B, S, 8], f32>, %b: !mt.tensor<[B, S, 4], f32>) {
  // expected-error @+1 {{cannot broadcast [B, S, 8] and [B, S, 4]}}
  %r = mt.add %a, %b : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 4], f32> -> !mt.tensor<[B, S, 8], f32>
  return
}

// -----

func.func @f(%a: !mt.tensor<[B, S, 8], f32>, %b: !mt.tensor<[B, 8], f32>, %c: !mt.tensor<[S, 8], f32>) {
  // Right-aligned broadcasting: [S, 8] stretches over B.
  %ok = mt.add %c, %a : !mt.tensor<[S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
  // Symbolic dims only match themselves: B against S fails.
  // expected-error @+1 {{cannot broadcast [B, 8] and [B, S, 8]}}
  %r = mt.add %b, %a : !mt.tensor<[B, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
  return
}

// -----

func.func @f(%a: !mt.tensor<[B, S, 8], f32>, %b: !mt.tensor<[4, 16], f32>) {
  // expected-error @+1 {{'mt.matmul' op}}
  %r = mt.matmul %a, %b : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[4, 16], f32> -> !mt.tensor<[B, S, 16], f32>
  return
}

// -----

func.func @f(%a: !mt.tensor<[B, S, 8], f32>, %b: !mt.tensor<[8, 16], f32>) {
  // expected-error @+1 {{result shape [B, S, 8] does not match the inferred shape [B, S, 16]}}
  %r = mt.matmul %a, %b : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 8], f32>
  return
}

// -----

func.func @f(%a: !mt.tensor<[B, S, 8], f32>) {
  // expected-error @+1 {{'mt.reshape' op}}
  %r = mt.reshape %a : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 4], f32>
  return
}

// -----

func.func @f(%a: !mt.tensor<[B, S, 8], f32>) {
  // Same symbolic dims in another order, same element count: fine.
  %r = mt.reshape %a : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, 8, S], f32>
  // expected-error @+1 {{cannot reshape [B, S, 8] to [S, S, 8]: symbolic dimensions differ}}
  %s = mt.reshape %a : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[S, S, 8], f32>
  return
}

// -----

func.func @f(%q: !mt.tensor<[B, S, 6, 4], f32>, %k: !mt.tensor<[B, S, 4, 4], f32>) {
  // expected-error @+1 {{'mt.attention' op}}
  %r = mt.attention %q, %k, %k causal window = 0 softcap = 0.0 scale = 0.0 : !mt.tensor<[B, S, 6, 4], f32>, !mt.tensor<[B, S, 4, 4], f32>, !mt.tensor<[B, S, 4, 4], f32> -> !mt.tensor<[B, S, 6, 4], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 4, 6], f32>) {
  // expected-error @+1 {{'mt.rope' op}}
  %r = mt.rope %x theta = 1.0e+04 fraction = 0.1 : !mt.tensor<[B, S, 4, 6], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 4, 8], f32>) {
  // expected-error @+1 {{unsupported rope scaling "yarn" (supported: "llama3")}}
  %r = mt.rope %x theta = 1.0e+04 fraction = 1.0 {scaling = "yarn"} : !mt.tensor<[B, S, 4, 8], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 12], f32>) {
  // expected-error @+1 {{'mt.split' op}}
  %a, %b = mt.split %x axis = 2 sizes = [4, 4] : !mt.tensor<[B, S, 12], f32> -> !mt.tensor<[B, S, 4], f32>, !mt.tensor<[B, S, 4], f32>
  return
}

// -----

func.func @f(%ids: !mt.tensor<[B, S], f32>, %t: !mt.tensor<[16, 4], f32>) {
  // expected-error @+1 {{ids must be i32, got 'f32'}}
  %r = mt.embedding %ids, %t : !mt.tensor<[B, S], f32>, !mt.tensor<[16, 4], f32> -> !mt.tensor<[B, S, 4], f32>
  return
}

// -----

func.func @f(%l: !mt.tensor<[B, S, 16], f32>, %t: !mt.tensor<[B, S], f32>) {
  // expected-error @+1 {{targets must be i32, got 'f32'}}
  %r = mt.cross_entropy %l, %t ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], f32> -> !mt.tensor<[], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, S], i32>) {
  // expected-error @+1 {{input must be f32 or bf16, got 'i32'}}
  %r = mt.exp %x : !mt.tensor<[B, S], i32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 8], f32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %r = mt.gelu %x approximate = "fast" : !mt.tensor<[B, S, 8], f32>
  return
}

// -----

mt.model @M {
  // expected-error @+1 {{shape must be static, got [B, 8]}}
  mt.param @w : !mt.tensor<[B, 8], f32> init zeros
}

// -----

mt.model @M {
  // expected-error @+1 {{initializer 'normal' takes 1 argument(s), got 0}}
  mt.param @w : !mt.tensor<[8], f32> init normal
}

// -----

// expected-error @+1 {{must contain exactly one func.func @forward, found 0}}
mt.model @M {
  mt.param @w : !mt.tensor<[8], f32> init zeros
}

// -----

mt.model @M {
  // expected-error @+1 {{of a model must return a scalar f32 loss}}
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[B, S], i32> {
    return %t : !mt.tensor<[B, S], i32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 2 {
    // expected-error @+1 {{of a layer must take one activation and return one of the same type}}
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 4], f32> {
      %s = mt.slice %x axis = 2 start = 0 end = 4 : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 4], f32>
      return %s : !mt.tensor<[B, S, 4], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 2 {
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      // expected-error @+1 {{'w' is not a parameter of the enclosing mt.layer}}
      %w = mt.param_ref @w : !mt.tensor<[8], f32>
      return %x : !mt.tensor<[B, S, 8], f32>
    }
  }
  mt.param @w : !mt.tensor<[8], f32> init zeros
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.param @w : !mt.tensor<[8], f32> init zeros
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{does not match parameter type}}
    %w = mt.param_ref @w : !mt.tensor<[4], f32>
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 2 {
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      return %x : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{applies instances [1, 3) but layer @L has 2}}
    %h = mt.apply_layers @L [1, 2] %x : !mt.tensor<[B, S, 8], f32>
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 2 {
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      return %x : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %x: !mt.tensor<[B, S, 4], f32>) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{does not match layer activation type}}
    %h = mt.apply_layers @L [0, 2] %x : !mt.tensor<[B, S, 4], f32>
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 1 {
    mt.param @router : !mt.tensor<[8, 4], f32> init zeros
    mt.expert @E x 4 {
      func.func @forward(%t: !mt.tensor<[T, 8], f32>) -> !mt.tensor<[T, 8], f32> {
        return %t : !mt.tensor<[T, 8], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %r = mt.param_ref @router : !mt.tensor<[8, 4], f32>
      // expected-error @+1 {{top_k 5 exceeds the 4 experts}}
      %y = mt.moe %x, %r expert @E top_k = 5 aux_loss = 0.0 : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 1 {
    mt.expert @E x 4 {
      // expected-error @+1 {{of an expert must map [T, D] to [T, D]}}
      func.func @forward(%t: !mt.tensor<[B, 8], f32>) -> !mt.tensor<[B, 8], f32> {
        return %t : !mt.tensor<[B, 8], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      return %x : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 8], f32>) {
  // expected-error @+1 {{'mt.apply_layers' op is only valid in the forward of an mt.model}}
  %h = mt.apply_layers @L [0, 1] %x : !mt.tensor<[B, S, 8], f32>
  return
}

// -----

mt.model @M {
  mt.layer @L x 1 {
    mt.param @router : !mt.tensor<[8, 4], f32> init zeros
    mt.expert @E x 4 {
      func.func @forward(%t: !mt.tensor<[T, 8], f32>) -> !mt.tensor<[T, 8], f32> {
        return %t : !mt.tensor<[T, 8], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      return %x : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %r = mt.param_ref @router : !mt.tensor<[8, 4], f32>
      // expected-error @+1 {{result shape [4, 8] does not match the inferred shape [8, 4]}}
      %dx, %dr = mt.moe_grad %x, %r, %dy expert @E top_k = 2 aux_loss = 0.0 : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>, !mt.tensor<[4, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

mt.model @M {
  mt.layer @L x 1 {
    mt.param @router : !mt.tensor<[8, 4], f32> init zeros
    mt.expert @E x 4 {
      func.func @forward(%t: !mt.tensor<[T, 8], f32>) -> !mt.tensor<[T, 8], f32> {
        return %t : !mt.tensor<[T, 8], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      return %x : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %r = mt.param_ref @router : !mt.tensor<[8, 4], f32>
      // expected-error @+1 {{'F' is not an expert of @L}}
      %dx, %dr = mt.moe_grad %x, %r, %dy expert @F top_k = 2 aux_loss = 0.0 : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 8], f32>, %r: !mt.tensor<[8, 4], f32>, %dy: !mt.tensor<[B, S, 4], f32>) {
  // expected-error @+1 {{gradient shape [B, S, 4] does not match the input shape [B, S, 8]}}
  %dx, %dr = mt.moe_grad %x, %r, %dy expert @E top_k = 2 aux_loss = 0.0 : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32>, !mt.tensor<[B, S, 4], f32> -> !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32>
  return
}

// -----

// mt.fused: reductions must reduce the last axis of the iteration shape.
func.func @f(%x: !mt.tensor<[B, 8, 4], f32>) -> !mt.tensor<[B, 4], f32> {
  %r = mt.fused(%x) : (!mt.tensor<[B, 8, 4], f32>) -> !mt.tensor<[B, 4], f32> {
  ^bb0(%a: !mt.tensor<[B, 8, 4], f32>):
    // expected-error @+1 {{'mt.sum' op in an mt.fused body must reduce the last axis of the iteration shape [B, 8, 4]}}
    %s = mt.sum %a axis = 1 : !mt.tensor<[B, 8, 4], f32> -> !mt.tensor<[B, 4], f32>
    mt.yield %s : !mt.tensor<[B, 4], f32>
  }
  return %r : !mt.tensor<[B, 4], f32>
}

// -----

// mt.fused: no broadcast of a row value back over the iteration shape.
func.func @f(%x: !mt.tensor<[B, 8], f32>) -> !mt.tensor<[B, 8], f32> {
  %r = mt.fused(%x) : (!mt.tensor<[B, 8], f32>) -> !mt.tensor<[B, 8], f32> {
  ^bb0(%a: !mt.tensor<[B, 8], f32>):
    %s = mt.sum %a axis = 1 keepdim : !mt.tensor<[B, 8], f32> -> !mt.tensor<[B, 1], f32>
    // expected-error @+1 {{'mt.div' op reads a reduction's result in an mt.fused body, so its result must have a row shape ([B] or [B, 1])}}
    %p = mt.div %a, %s : !mt.tensor<[B, 8], f32>, !mt.tensor<[B, 1], f32> -> !mt.tensor<[B, 8], f32>
    mt.yield %p : !mt.tensor<[B, 8], f32>
  }
  return %r : !mt.tensor<[B, 8], f32>
}

// -----

// mt.fused: an input read per row cannot also be read per element.
func.func @f(%x: !mt.tensor<[8, 8], f32>, %w: !mt.tensor<[8], f32>) -> !mt.tensor<[8], f32> {
  // expected-error @+1 {{'mt.fused' op input 1 is read both per row and per element}}
  %r = mt.fused(%x, %w) : (!mt.tensor<[8, 8], f32>, !mt.tensor<[8], f32>) -> !mt.tensor<[8], f32> {
  ^bb0(%a: !mt.tensor<[8, 8], f32>, %b: !mt.tensor<[8], f32>):
    %m = mt.mul %a, %b : !mt.tensor<[8, 8], f32>, !mt.tensor<[8], f32> -> !mt.tensor<[8, 8], f32>
    %s = mt.max %m axis = 1 : !mt.tensor<[8, 8], f32> -> !mt.tensor<[8], f32>
    %t = mt.add %s, %b : !mt.tensor<[8], f32>, !mt.tensor<[8], f32> -> !mt.tensor<[8], f32>
    mt.yield %t : !mt.tensor<[8], f32>
  }
  return %r : !mt.tensor<[8], f32>
}

// -----

func.func @f(%t: !mt.tensor<[64, 8], f32>) {
  // expected-error @+1 {{a slice that ends at S must start at 0, got start 1}}
  %r = mt.slice %t axis = 0 start = 1 end = S : !mt.tensor<[64, 8], f32> -> !mt.tensor<[S, 8], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, S, 8], f32>) {
  // expected-error @+1 {{cannot slice the symbolic dimension S of [B, S, 8]}}
  %r = mt.slice %x axis = 1 start = 0 end = S : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[S, 8], f32>) {
  // expected-error @+1 {{[1, S) does not place [S, 8] inside [64, 8]}}
  %r = mt.pad %x axis = 0 start = 1 end = S : !mt.tensor<[S, 8], f32> -> !mt.tensor<[64, 8], f32>
  return
}

// -----

func.func @f(%t: !mt.tensor<[64, 8], f32>) {
  // expected-error @+1 {{end must be a non-negative integer or S}}
  %r = mt.slice %t axis = 0 start = 0 end = -3 : !mt.tensor<[64, 8], f32> -> !mt.tensor<[S, 8], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, 8], f32>, %dy: !mt.tensor<[B, 8], f32>) {
  // expected-error @+1 {{unknown elementwise function 'swish' (expected one of 'neg', 'exp', 'log', }}
  %dx = mt.unary_grad swish %x, %dy param = 0.0 : !mt.tensor<[B, 8], f32>
  return
}

// -----

func.func @f(%x: !mt.tensor<[B, 8], f32>, %dy: !mt.tensor<[B, 8], f32>) {
  // The generic form's kind is the enum attribute, not a string.
  // expected-error @+1 {{invalid properties {kind = "silu", param = 0.000000e+00 : f64} for op mt.unary_grad: Invalid attribute `kind` in property conversion: "silu"}}
  %dx = "mt.unary_grad"(%x, %dy) <{kind = "silu", param = 0.0 : f64}> : (!mt.tensor<[B, 8], f32>, !mt.tensor<[B, 8], f32>) -> !mt.tensor<[B, 8], f32>
  return
}
