//===- HFExport.cpp - Checkpoints back to HuggingFace layout --------------===//
//
// Part of mtc. See HFExport.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/hf/HFExport.h"

#include "lib/Bundle/Bundle.h"
#include "lib/Format/MappedFile.h"
#include "lib/Support/Files.h"
#include "runtime/checkpoint/Checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::driver {

namespace {

/// One parameter instance of the bundle, in ParamStore's order.
struct Instance {
  std::string name;
  const bundle::Param *decl;
};

std::vector<Instance> instances(const bundle::Bundle &b) {
  std::vector<Instance> out;
  for (const bundle::Param &p : b.params)
    out.push_back({p.name, &p});
  for (const bundle::Layer &l : b.layers)
    for (int64_t i = 0; i < l.count; ++i) {
      std::string prefix = l.name + "." + std::to_string(i) + ".";
      for (const bundle::Param &p : l.params)
        out.push_back({prefix + p.name, &p});
      for (const bundle::Expert &x : l.experts)
        for (int64_t e = 0; e < x.count; ++e)
          for (const bundle::Param &p : x.params)
            out.push_back(
                {prefix + x.name + "." + std::to_string(e) + "." + p.name, &p});
    }
  return out;
}

Status makeDir(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return Status::error("'" + dir + "' exists and is not a directory");
    return Status::success();
  }
  if (::mkdir(dir.c_str(), 0755) != 0)
    return Status::error("cannot create directory '" + dir +
                         "': " + std::strerror(errno));
  return Status::success();
}

/// -o \p outDir: a directory to write into, or one to create in a writable
/// directory.
Status checkOutputDir(const std::string &outDir) {
  std::string dir = outDir;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  struct stat st;
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if (exists && !S_ISDIR(st.st_mode))
    return Status::error("-o '" + outDir + "' exists and is not a directory");
  const std::string where = exists ? dir : dirName(dir);
  if (::access(where.c_str(), W_OK) != 0)
    return Status::error("-o '" + outDir + "': cannot write in '" + where +
                         "': " + std::strerror(errno));
  return Status::success();
}

} // namespace

Status exportHF(const std::string &ckptDir, const std::string &outDir,
                const HFExportOptions &opts,
                std::vector<std::string> *written) {
  if (sameFile(outDir, ckptDir))
    return Status::error("-o '" + outDir + "' is the checkpoint '" + ckptDir +
                         "' itself; an output never overwrites an input: "
                         "give another directory");
  // The output is checked before the checkpoint is read.
  if (Status st = checkOutputDir(outDir); !st)
    return st;
  // The checkpoint resume would accept, checked as resume checks it, read
  // whole from one checkpoint while a run may be replacing it.
  bundle::Bundle b;
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  Status loaded = readStableCheckpoint(ckptDir, [&](const std::string
                                                        &resolved) {
    // The next save of the run replaces the checkpoint directory as a whole
    // (and DIR.tmp, DIR.bak beside it): an export inside would vanish.
    for (const std::string &dir :
         {ckptDir, resolved, ckptDir + ".tmp", ckptDir + ".bak"})
      if (isInside(outDir, dir))
        return Status::error("-o '" + outDir + "' is inside the checkpoint '" +
                             dir +
                             "', which the next save of its run replaces as a "
                             "whole; export outside it");
    if (Status st = verifyCheckpointFiles(resolved); !st.ok())
      return st;
    Expected<bundle::Bundle> read = bundle::readFile(resolved + "/model.mtb");
    if (!read)
      return Status::error(read.message() + " (is '" + ckptDir +
                           "' a checkpoint written by mtc train --out?)");
    b = std::move(read).value();
    if (b.hfNames.empty())
      return Status::error(
          ckptDir + "/model.mtb: model '" + b.model +
          "' has no HuggingFace tensor names; only models imported with --hf "
          "DIR (or mtc compile --hf DIR) can be exported to HuggingFace "
          "layout");
    if (opts.dtype != TensorDType::F32 && opts.dtype != TensorDType::BF16)
      return Status::error("export-hf writes F32 or BF16 tensors");
    std::string weightsPath = resolved + "/model.safetensors";
    Expected<SafetensorsFile> weights = SafetensorsFile::open(weightsPath);
    if (!weights)
      return Status::error(weights.message());

    // Every instance, read in mtc layout and turned into HF layout.
    std::vector<Instance> insts = instances(b);
    data.clear();
    data.reserve(insts.size());
    tensors.clear();
    std::map<std::string, std::string> seen; // HF tensor -> instance
    std::vector<float> buf;
    for (const Instance &inst : insts) {
      auto it = b.hfNames.find(inst.name);
      if (it == b.hfNames.end())
        return Status::error(ckptDir + "/model.mtb: parameter '" + inst.name +
                             "' has no HuggingFace name");
      const bundle::HFTensorRef &ref = it->second;
      auto [pos, fresh] = seen.insert({ref.tensor, inst.name});
      if (!fresh)
        return Status::error(ckptDir + "/model.mtb: parameters '" +
                             pos->second + "' and '" + inst.name +
                             "' both map to '" + ref.tensor + "'");
      std::vector<int64_t> shape(inst.decl->shape.begin(),
                                 inst.decl->shape.end());
      size_t n = 1;
      for (int64_t d : shape)
        n *= static_cast<size_t>(d);
      buf.resize(n);
      if (Status st = weights->readAsF32(inst.name, buf.data(), n); !st.ok())
        return Status::error(weightsPath + ": " + st.message());
      data.emplace_back(n);
      std::vector<float> &dst = data.back();
      if (ref.transpose) {
        if (shape.size() != 2)
          return Status::error(ckptDir + "/model.mtb: '" + inst.name +
                               "' is marked transposed but is not a matrix");
        // mtc [in, out] row-major -> HF [out, in].
        int64_t in = shape[0], out = shape[1];
        for (int64_t r = 0; r < in; ++r)
          for (int64_t c = 0; c < out; ++c)
            dst[c * in + r] = buf[r * out + c];
        std::swap(shape[0], shape[1]);
      } else {
        dst = buf;
      }
      tensors.push_back({ref.tensor, opts.dtype, shape, dst.data()});
    }
    return Status::success();
  });
  if (!loaded.ok())
    return loaded;
  // HF checkpoints list tensors by name.
  std::vector<size_t> order(tensors.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    return tensors[a].name < tensors[c].name;
  });
  std::vector<TensorToWrite> sorted;
  for (size_t k : order)
    sorted.push_back(tensors[k]);

  if (Status st = makeDir(outDir); !st.ok())
    return st;
  if (Status st = writeSafetensorsSharded(outDir, sorted, opts.maxShardBytes,
                                          {{"format", "pt"}}, written);
      !st.ok())
    return st;
  if (written)
    for (std::string &f : *written)
      f = outDir + "/" + f;
  if (!b.hfConfig.empty()) {
    Expected<AtomicFileWriter> w =
        AtomicFileWriter::create(outDir + "/config.json");
    if (!w)
      return Status::error(w.message());
    if (Status st = w->write(b.hfConfig.data(), b.hfConfig.size()); !st.ok())
      return st;
    if (Status st = w->commit(); !st.ok())
      return st;
    if (written)
      written->push_back(outDir + "/config.json");
  }
  if (!b.hfTokenizer.empty()) {
    Expected<AtomicFileWriter> w =
        AtomicFileWriter::create(outDir + "/tokenizer.json");
    if (!w)
      return Status::error(w.message());
    if (Status st = w->write(b.hfTokenizer.data(), b.hfTokenizer.size());
        !st.ok())
      return st;
    if (Status st = w->commit(); !st.ok())
      return st;
    if (written)
      written->push_back(outDir + "/tokenizer.json");
  }
  return Status::success();
}

} // namespace mtc::driver
