//===- CudaFusedKernels.cpp - Fused regions on the CUDA backend -*- C++ -*-===//
//
// Part of mtc. The CUDA kernel-table entry of `fused`: the op's region runs
// as the CUDA C the compiler emitted for it (the bundle's cuda_kernels,
// docs/bundle.md; compiler/Target/CudaKernels.h). The entry is the op's
// kernel name and the storage signature of its operands and results
// (bundle::fusedSignature: "fb_f"), its launch the rule the compiler
// recorded: ceil(items / per_block) blocks (at most max_blocks) of `block`
// threads, items being the iteration space's elements or rows. The module is
// compiled once per backend: by NVRTC on a GPU (through the kernel cache),
// by the host C++ compiler on the emulated driver.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Plan.h"
#include "runtime/exec/cuda/CudaOpContext.h"

#include <algorithm>

namespace mtc::exec::cudaops {

namespace {

namespace ops = cuda::ops;

void fused(OpContext &c) {
  const bundle::Op &op = c.op;
  const std::string &name = c.attrs<FusedAttrs>().kernel;
  const bundle::CudaKernels &ck = c.bundle().cudaKernels;
  if (name.empty() || ck.source.empty())
    c.fail("the CUDA backend runs fused regions as the CUDA C the compiler "
           "emits for them, and this bundle has none (compile the model "
           "with --device cuda or cuda-emu)");
  const bundle::CudaFusedKernel *k = ck.kernel(name);
  if (!k)
    c.fail("the bundle's CUDA kernels have no kernel '" + name + "'");
  std::vector<Tensor> ins;
  std::vector<DevPtr> ptrs;
  std::string sig;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    ins.push_back(c.in(i));
    sig += ins.back().dtype == DType::BF16 ? 'b' : 'f';
  }
  sig += '_';
  std::vector<Tensor> outs;
  for (size_t r = 0; r < op.results.size(); ++r) {
    outs.push_back(c.newOutput(r));
    sig += outs.back().dtype == DType::BF16 ? 'b' : 'f';
  }
  const bundle::CudaFusedEntry *e = k->entry(sig);
  if (!e)
    c.fail("kernel '" + name + "' has no entry for storage '" + sig + "'");
  // n: the elements of the iteration shape, the largest shape in the body
  // (as the CPU kernels take it).
  long long n = 0;
  for (const bundle::ValueType &t : op.region->values) {
    long long numel = 1;
    for (int64_t d : c.concrete(t))
      numel *= d;
    n = std::max(n, numel);
  }
  long long items = k->launch == "rows" ? n / k->row : n;
  if (items > 0) {
    long long grid = (items + e->perBlock - 1) / e->perBlock;
    if (e->maxBlocks > 0)
      grid = std::min<long long>(grid, e->maxBlocks);
    if (grid > 0x7fffffffLL)
      c.fail("kernel '" + e->entry + "': " + std::to_string(grid) +
             " blocks are more than a grid holds");
    for (const Tensor &t : ins)
      ptrs.push_back(ptr(t));
    for (const Tensor &t : outs)
      ptrs.push_back(ptr(t));
    std::vector<void *> args;
    for (DevPtr &p : ptrs)
      args.push_back(&p);
    args.push_back(&n);
    CudaBackend &b = backendOf(c);
    Expected<void *> fn = b.fusedFunction(ck, e->entry);
    if (!fn)
      c.fail(fn.message());
    ops::Launch L = b.launch();
    ops::Dim3 g, blk;
    g.x = static_cast<unsigned>(grid);
    blk.x = static_cast<unsigned>(e->block);
    check(c, L.launchFunction(*fn, e->entry, g, blk, 0, args));
  }
  for (size_t r = 0; r < outs.size(); ++r)
    c.setResult(std::move(outs[r]), r);
}

} // namespace

void addFusedKernels(KernelTable &t) { t.set(bundle::OpKind::Fused, fused); }

} // namespace mtc::exec::cudaops
