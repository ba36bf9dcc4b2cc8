//===- Bundle.h - The compiler/runtime contract -----------------*- C++ -*-===//
//
// Part of mtc. A bundle (.mtb) is everything the runtime needs to train a model
// without MLIR: the parameters (names, shapes, dtypes, initializers), the layer
// templates and their functions (forward, backward), and the model's functions
// (forward, forward_backward) as flat lists of operations over numbered values.
// The compiler writes it (compiler/Target/BundleWriter); the runtime reads it.
//
// On disk a bundle is one JSON document (format "mtc-bundle", version 1); see
// docs/bundle.md for the schema.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_BUNDLE_BUNDLE_H
#define MTC_LIB_BUNDLE_BUNDLE_H

#include "lib/Support/Shape.h"
#include "lib/Support/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace mtc::bundle {

constexpr int kVersion = 1;

struct ValueType {
  Shape shape; ///< may hold kDimB, kDimS, kDimT
  DType dtype = DType::F32;
};

using Attr =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

/// One operation: `name` is the mt op name without the dialect ("matmul",
/// "rmsnorm_grad", ...). Operands and results are value ids of the function.
struct Function;

struct Op {
  std::string name;
  std::vector<int> operands;
  std::vector<int> results;
  std::string symbol; ///< param_ref/param_grad: parameter; apply_layers: layer
  std::map<std::string, Attr> attrs;
  std::string loc; ///< "file:line:col" of the source, for runtime errors
  /// `fused` only: the body, a function whose arguments are the op's
  /// operands and whose results are the op's results (JSON: "region").
  std::shared_ptr<Function> region;

  const Attr *attr(const std::string &key) const;
  int64_t intAttr(const std::string &key, int64_t dflt = 0) const;
  double floatAttr(const std::string &key, double dflt = 0) const;
  bool boolAttr(const std::string &key, bool dflt = false) const;
  std::string strAttr(const std::string &key,
                      const std::string &dflt = "") const;
  std::vector<int64_t> listAttr(const std::string &key) const;
};

struct Function {
  std::vector<int> args;
  std::vector<int> results;
  std::vector<ValueType> values; ///< type of every value id
  std::vector<Op> ops;
};

struct Param {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  std::string init; ///< zeros | ones | normal | scaled_normal | uniform
  std::vector<double> initArgs;
  int64_t numel() const;
};

/// The experts of a mixture-of-experts layer: `count` experts sharing one
/// template; parameters exist once per expert per layer instance
/// (`Layer.i.Expert.e.name`). `forward` maps [T, D] to [T, D] (T: the tokens
/// routed to the expert), `backward` is `(t, dt) -> dt_in`.
struct Expert {
  std::string name;
  int64_t count = 0;
  std::vector<Param> params;
  std::map<std::string, Function> functions; ///< "forward", "backward"
};

struct Layer {
  std::string name;
  int64_t count = 0;
  std::vector<Param> params;
  std::map<std::string, Function> functions; ///< "forward", "backward"
  std::vector<Expert> experts; ///< used by the layer's moe/moe_grad ops

  const Expert *expert(const std::string &name) const;
};

/// The HuggingFace checkpoint tensor a parameter instance is read from
/// (`mtc train --hf DIR`, docs/hf.md): the tensor's name and whether the
/// parameter is that tensor transposed.
struct HFTensorRef {
  std::string tensor;
  bool transpose = false;
};

/// A buffer of the step plan (docs/streaming.md, "Device buffers").
struct PlanBuffer {
  std::string name;  ///< unique: "weights.0", "grads.1", "workspace", ...
  std::string kind;  ///< model_weights | model_grads | weights | grads |
                     ///< activations | checkpoints | stage | workspace
  std::string space; ///< device | host
  int64_t bytes = 0;
  int64_t offset = -1; ///< device: offset in the arena (mtc-plan-memory)
};

/// One command of the step program. `layers` commands have a body that runs
/// once per layer instance; every other command has none.
struct PlanCommand {
  std::string op; ///< load_model_weights | stage | layers | return_model_grads
                  ///< | optimizer_update | prefetch | wait_weights | save |
                  ///< restore | compute | grad_return
  std::map<std::string, Attr> attrs;
  std::vector<PlanCommand> body;

  int64_t intAttr(const std::string &key, int64_t dflt = 0) const;
  std::string strAttr(const std::string &key,
                      const std::string &dflt = "") const;
};

/// The training step as a program over layers, buffers and streams, for
/// concrete micro-batch shapes and a device budget (docs/streaming.md).
struct StepPlan {
  int64_t batch = 0, seq = 0; ///< one micro-batch is [batch, seq] tokens
  int64_t microBatches = 1;
  int64_t prefetchDepth = 2; ///< weight slots
  /// full (save inputs) | none (save all) | selective (save the results of
  /// matmul, attention and moe; recompute the rest)
  std::string recompute = "full";
  std::string checkpoints = "device"; ///< device | host
  /// How tensors are stored on the device (Plan.h, Precision): fp32 | bf16.
  /// JSON: optional "precision" (absent: fp32).
  std::string precision = "fp32";
  /// Segment checkpointing (docs/streaming.md): only every k-th instance of
  /// a layer loop keeps its input; the backward of a segment recomputes the
  /// forward of the others (recompute "full" only; a device `segment`
  /// buffer, prefetch_depth >= k). JSON: optional "checkpoint_every"
  /// (absent: 1, written only when > 1).
  int64_t checkpointEvery = 1;
  /// Mixed recomputation (docs/streaming.md): with recompute "selective",
  /// only the first S layer instances of the stack (counted over the forward
  /// `layers` loops in program order) keep their selective checkpoints; the
  /// others keep their input alone and run the layer's "backward_full".
  /// JSON: optional "selective_layers" (absent: -1, every instance).
  int64_t selectiveLayers = -1;
  /// The host gradients the plan was compiled for (`--grad-dtype`, Plan.h
  /// GradDType) of the deferred optimizer placement: "fp32" | "bf16"; ""
  /// in plans with the immediate placement's ring (grads.host) and in
  /// bundles written before it was recorded (training then takes the
  /// flag). JSON: optional "grad_dtype".
  std::string gradDType;
  int64_t deviceBudget = 0; ///< bytes
  int64_t devicePeak = 0;   ///< bytes the buffers below need
  std::vector<PlanBuffer> buffers;
  std::vector<PlanCommand> program;

  const PlanBuffer *buffer(const std::string &name) const;
};

/// How one CUDA entry point of a fused kernel is launched: grid = ceil(items
/// / perBlock) blocks of `block` threads (at most maxBlocks when it is not 0:
/// the kernel then loops over the items), items being the elements of the
/// iteration space ("elements" kernels) or its rows ("rows" kernels).
struct CudaFusedEntry {
  std::string entry;     ///< "mtc_fused_3_fb_f"
  std::string signature; ///< storage of the inputs, '_', the outputs: "fb_f"
  int64_t block = 0;     ///< threads per block (a multiple of 32, <= 1024)
  int64_t perBlock = 0;  ///< items per block
  int64_t maxBlocks = 0; ///< grid cap; 0: none
};

/// A "rows" kernel computes a row of up to this many elements with one warp
/// (an entry's block then holds block / 32 rows), a longer row with a whole
/// block (one row per block). The compiler emits, and the reader checks,
/// launch rules by it.
constexpr int64_t kCudaWarpRowMax = 1024;

/// The CUDA kernel of one distinct fused region (the `kernel` attribute of
/// its `fused` ops), with one entry per storage signature the bundle's plan
/// needs.
struct CudaFusedKernel {
  std::string name;   ///< "mtc_fused_3"
  std::string launch; ///< "elements" | "rows"
  int64_t row = 0;    ///< "rows": the row length (the last axis)
  std::vector<CudaFusedEntry> entries;

  /// The entry for storage \p signature, or null.
  const CudaFusedEntry *entry(const std::string &signature) const;
};

/// The CUDA C of the `fused` ops (docs/bundle.md, "cuda_kernels"): one source
/// compiled by NVRTC on a GPU, by the host C++ compiler on cuda-emu.
/// JSON: optional "cuda_kernels": {"format": "cuda-c", "file": file,
/// "xxh64": of the source, "fused_xxh64": of the fused ops that name
/// kernels, "source": text, "kernels": [{"name", "launch", "row",
/// "entries": [{"entry", "signature", "block", "per_block",
/// "max_blocks"}]}]}.
struct CudaKernels {
  std::string file = "fused.cu"; ///< the module name the runtime loads
  std::string source;            ///< empty: no section
  std::vector<CudaFusedKernel> kernels;

  /// The kernel named \p name, or null.
  const CudaFusedKernel *kernel(const std::string &name) const;
};

struct Bundle {
  std::string model;
  /// A hash of the model's computation as the frontend lowered it (its
  /// parameters, config and functions before any training pass; not its
  /// name): equal for two compiles of one model under other options
  /// (--recompute, --cpu, a step plan), different when the model's math
  /// changes. 16 hex digits; "" for bundles of compilers before it existed.
  /// JSON: optional "model_hash".
  std::string modelHash;
  std::map<std::string, double> config;
  std::vector<Param> params;
  std::vector<Layer> layers;
  std::map<std::string, Function> functions; ///< "forward", "forward_backward"
  /// Compiled CPU code of the `fused` ops (their "kernel" attribute names a
  /// symbol in it): the bytes of an ELF shared object, empty if none. JSON:
  /// "cpu_kernels": {"format": "elf-shared-object", "target": cpuKernelsTarget,
  /// "xxh64": checksum of the bytes (16 hex digits), "data": base64}.
  std::string cpuKernels;
  std::string cpuKernelsTarget; ///< the CPU they were compiled for ("znver3")
  /// CUDA C of the `fused` ops for the CUDA backend (empty source if none).
  CudaKernels cudaKernels;
  /// For a model imported from a HuggingFace config: parameter instance name
  /// (`name`, `Layer.i.name`, `Layer.i.Expert.e.name`) to its checkpoint
  /// tensor. Empty otherwise. JSON: optional "hf_names": {instance:
  /// {"tensor": NAME, "transpose": BOOL}}; every key must be an instance.
  std::map<std::string, HFTensorRef> hfNames;
  /// The HuggingFace config.json the model was imported from (its text), so
  /// that `mtc export-hf` can write it back beside the weights; empty
  /// otherwise. JSON: optional "hf_config": string.
  std::string hfConfig;
  /// The HuggingFace tokenizer.json found beside that config (its text), used
  /// to tokenise .txt training data, prompts and generated text, and written
  /// back by `mtc export-hf`; empty if there was none. JSON: optional
  /// "hf_tokenizer": string.
  std::string hfTokenizer;
  /// The streaming step plan, if the bundle was compiled for a device budget
  /// (JSON: optional "step", docs/streaming.md).
  std::shared_ptr<StepPlan> step;

  const Layer *layer(const std::string &name) const;
  int64_t totalLayerInstances() const;
  /// The number of rows of the table the model's forward embeds its token ids
  /// with (its vocabulary), or 0 if it has no embedding.
  int64_t vocabulary() const;
};

/// Checks a run of \p batch sequences of \p seq tokens against the token
/// and target shapes the model's forward declares: a static dimension must
/// equal the run's (a model declaring `tokens: [B, 64]` cannot train at
/// --seq 128). \p seq < 0 stands for every length (generation): a static
/// sequence length is then an error; 0 skips a dimension. A \p seq > 0 must
/// also fit every slice ending at S (the first S rows of a learned position
/// table). Errors name the flag and both values.
Status checkTokenShapes(const Bundle &b, int64_t batch, int64_t seq);

/// Checks that sequences of \p seq tokens fit every slice ending at S (the
/// first S rows of a learned position table) in \p b's functions; the error
/// names \p flag ("--seq", "--context"), the table and its rows.
Status checkSequenceFits(const Bundle &b, int64_t seq, const std::string &flag);

/// Serialises to the JSON text of a .mtb file.
std::string toJson(const Bundle &b);
/// Parses, then validates (Validate.h: value ids, ops, dtypes, shapes,
/// references; the CPU kernels' checksum). The error names the first
/// problem and where in the bundle it is.
Expected<Bundle> fromJson(const std::string &text);

/// Atomic write (temporary file + rename); errors name the file.
Status writeFile(const Bundle &b, const std::string &path);
/// Reads a .mtb file; errors name the file.
Expected<Bundle> readFile(const std::string &path);

/// Standard base64 (RFC 4648, with padding), used for binary fields.
std::string base64Encode(const std::string &bytes);
/// Decodes \p text into \p out; false if it is not valid padded base64.
bool base64Decode(const std::string &text, std::string &out);

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_BUNDLE_H
