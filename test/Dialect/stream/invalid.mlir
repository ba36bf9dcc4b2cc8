// Verifier errors of the stream dialect.
// RUN: mtc-opt %s -split-input-file -verify-diagnostics

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // expected-error @+1 {{batch must be >= 1, got 0}}
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 0 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // expected-error @+1 {{expected one of [full, none, selective, auto] for recompute policy, got: some}}
  stream.step @Tiny recompute = some checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // expected-error @+1 {{expected one of [device, host, auto] for checkpoint placement, got: disk}}
  stream.step @Tiny recompute = full checkpoints = disk attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // expected-error @+1 {{device_budget must be >= 0, got -1}}
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = -1 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // expected-error @+1 {{names no mt.model of its module: @Other}}
  stream.step @Other recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{names no layer of model @Tiny: @Nope}}
    stream.layers @Nope [0, 1] forward op_index = 0 {
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{instances [2, 6) exceed the 4 instances of @Block}}
    stream.layers @Block [2, 4] forward op_index = 0 {
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{expected one of [forward, backward] for layer loop direction, got: sideways}}
    stream.layers @Block [0, 4] sideways op_index = 0 {
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{body must hold exactly one stream.compute, has 0}}
    stream.layers @Block [0, 4] forward op_index = 2 {
      stream.save to = device
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] backward op_index = 2 {
      // expected-error @+1 {{is only valid in a forward stream.layers loop}}
      stream.save to = device
      stream.compute backward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{is only valid in a backward stream.layers loop}}
      stream.restore from = device
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{is only valid in a backward stream.layers loop}}
      stream.grad_return stream = d2h
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] backward op_index = 2 {
      // expected-error @+1 {{is only valid in a forward stream.layers loop}}
      stream.optimizer_update ahead = 1
      stream.compute backward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{ahead must be >= 0, got -1}}
      stream.optimizer_update ahead = -1
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{ahead must be >= 0, got -2}}
      stream.prefetch ahead = -2 stream = h2d event = "e"
      stream.wait_weights event = "e"
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{runs on the h2d stream, got d2h}}
      stream.prefetch ahead = 1 stream = d2h event = "e"
      stream.wait_weights event = "e"
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{runs 'backward' in a forward loop}}
      stream.compute backward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      stream.prefetch ahead = 1 stream = h2d event = "e"
      // expected-error @+1 {{runs before its weights are waited for}}
      stream.compute forward
      stream.wait_weights event = "e"
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{expected one of [device, host] for memory space, got: disk}}
      stream.save to = disk
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{expected one of [model_weights, model_grads, weights, grads, activations, checkpoints, stage, workspace] for buffer kind, got: cache}}
    stream.buffer @b kind = cache space = device bytes = 64
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{offset must be a non-negative multiple of 256, got 100}}
    stream.buffer @b kind = stage space = device bytes = 64 offset = 100
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{only checkpoints, activations, the stage and the gradient ring can live in host memory}}
    stream.buffer @b kind = workspace space = host bytes = 64
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{a host buffer has no arena offset}}
    stream.buffer @b kind = checkpoints space = host bytes = 64 offset = 0
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{ends at byte 8388864, beyond the step's device_peak 8388608}}
    stream.buffer @b kind = stage space = device bytes = 512 offset = 8388352
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-note @+1 {{see existing symbol definition here}}
    stream.buffer @b kind = stage space = device bytes = 64
    // expected-error @+1 {{redefinition of symbol named 'b'}}
    stream.buffer @b kind = stage space = device bytes = 64
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{expects 0 <= begin <= end, got [3, 2)}}
    stream.stage [3, 2)
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
  // expected-error @+1 {{expects parent op 'stream.layers'}}
  stream.compute forward
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{expects parent op 'stream.layers'}}
    stream.save to = device
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // A step holds a decided policy, never the request auto.
  // expected-error @+1 {{recompute must be decided (full, none or selective), got auto}}
  stream.step @Tiny recompute = auto checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // expected-error @+1 {{checkpoints must be placed (device or host), got auto}}
  stream.step @Tiny recompute = full checkpoints = auto attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] backward op_index = 2 {
      stream.compute backward
      // expected-error @+1 {{runs on the d2h stream, got h2d}}
      stream.grad_return stream = h2d
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    // expected-error @+1 {{expected one of [device, host] for memory space, got: disk}}
    stream.buffer @b kind = checkpoints space = disk bytes = 64
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64} {
    stream.layers @Block [0, 4] forward op_index = 2 {
      // expected-error @+1 {{expected one of [compute, h2d, d2h, optimizer] for stream, got: pcie}}
      stream.prefetch ahead = 1 stream = pcie event = "e"
      stream.wait_weights event = "e"
      stream.compute forward
    }
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // Segment checkpointing recomputes whole layers: full only.
  // expected-error @+1 {{checkpoint_every 2 needs recompute = full, got selective}}
  stream.step @Tiny recompute = selective checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64, checkpoint_every = 2 : i64} {
  }
}

// -----

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  // A segment has at least one instance.
  // expected-error @+1 {{checkpoint_every must be >= 1, got 0}}
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64, checkpoint_every = 0 : i64} {
  }
}
