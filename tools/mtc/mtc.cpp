//===- mtc.cpp - The mtc command-line driver --------------------*- C++ -*-===//
//
// Part of mtc. `mtc <command> ...`: one entry point for users. The table
// below names each command, its usage and its run function (one file per
// command, declared in Tool.h); `mtc --help` lists them.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "runtime/driver/TrainCommand.h"
#include "tools/mtc/CudaEmit.h"

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace mtc::cli {
namespace {

const Command kCommands[] = {
    {"compile",
     "mtc compile MODEL.mt|--hf DIR "
     "[--emit=ast|mlir|mlir-grad|summary|bundle|cuda|ptx|kernel-stats] "
     "[-o FILE] [--target cpu|cuda] [--arch sm_XY] [--cpu NAME] [--recompute "
     "full|none|selective|auto] [--set "
     "NAME=VALUE]... [--device-memory SIZE|auto --batch N --seq N "
     "[--host-memory SIZE] [--micro-batches N] [--prefetch-depth N] "
     "[--checkpoint-every K] [--checkpoints "
     "device|host|auto] [--precision fp32|bf16]] [--device "
     "cpu|cuda|cuda-emu] [--gpu NAME|FILE.json]",
     "check a model; print its AST, IR (mlir-grad: with backward functions) "
     "or parameter summary, or write a bundle (-o model.mtb; with "
     "--device-memory it carries a streaming step plan); with --target cuda, "
     "print its CUDA kernels, their PTX or ptxas statistics",
     runCompile,
     "--device cuda|cuda-emu (or --target cuda) compiles the bundle for the\n"
     "  CUDA backend: its fused regions also as CUDA C (docs/cuda.md).\n"
     "  Default: cpu. With --target cuda, --emit=cuda prints the CUDA C of\n"
     "  every kernel the model needs (library and fused), --emit=ptx their\n"
     "  PTX for --arch (default sm_90) and --emit=kernel-stats ptxas'\n"
     "  registers, spills and shared memory per kernel (both need the CUDA\n"
     "  toolkit's NVRTC). --gpu names the GPU's hardware profile (default\n"
     "  h200 with --device cuda) on which --recompute auto simulates its\n"
     "  candidate plans and keeps the fastest (docs/streaming.md)."},
    {"plan",
     "mtc plan MODEL.mt|--hf DIR --batch N --seq N [--device-memory SIZE|auto] "
     "[--host-memory SIZE] "
     "[--micro-batches N] [--prefetch-depth N] [--recompute "
     "auto|full|selective|none] [--checkpoint-every K] "
     "[--checkpoints device|host|auto] [--precision fp32|bf16] [--set "
     "NAME=VALUE]... [--device cpu|cuda|cuda-emu] [--gpu NAME|FILE.json] "
     "[--ranks N [--shard-optimizer auto|on|off]]",
     "print the streaming memory plan of a model: device buffers, peak, "
     "smallest feasible budget, host memory (state bytes per parameter, "
     "every host buffer, host_memory_bytes); with --ranks N, one rank's plan "
     "of a data-parallel run and its reductions (allreduce_bytes); with "
     "--recompute auto, every candidate plan and its predicted step time",
     runPlan},
    {"simulate",
     "mtc simulate MODEL.mt|--hf DIR --gpu NAME|FILE.json --batch N --seq N "
     "[--micro-batches N] [--device-memory SIZE|auto] [--host-memory SIZE] "
     "[--prefetch-depth N] [--recompute auto|full|selective|none] "
     "[--checkpoint-every K] [--checkpoints device|host|auto] "
     "[--precision bf16|fp32] [--clip X] "
     "[--optimizer-placement auto|deferred|immediate] "
     "[--grad-dtype fp32|bf16] [--set NAME=VALUE]... "
     "[--timeline FILE.json] [--sweep] [--host-convert on|off] "
     "[--convert-threads N]\n"
     "       " +
         std::string(calibrateUsage()),
     "predict one training step on a GPU from a hardware profile: the plan "
     "`mtc train` would run, replayed as an event simulation (step time, "
     "tokens/s, MFU, link traffic, exposed copies and optimizer, "
     "bottleneck)",
     runSimulate,
     "--gpu names a built-in profile (a100-80gb, b200, gh200, h100-pcie,\n"
     "  h100-sxm, h200, rtx4090) or a JSON file (docs/simulate.md).\n"
     "--device-memory defaults to auto: the profile's memory less the CUDA\n"
     "  backend's allocations and margin. --precision defaults to bf16.\n"
     "  Without --host-memory no host budget is checked.\n"
     "--timeline FILE.json writes the simulated step as a Chrome trace.\n"
     "--host-convert off: what if fp32 -> bf16 conversions (weight loads,\n"
     "  --grad-dtype bf16 gradient returns) ran on the device instead of the\n"
     "  host's conversion pool (the CUDA backend converts on the host).\n"
     "--convert-threads N: the pool's threads (MTC_CONVERT_THREADS; default\n"
     "  min(8, cores / 2) of the profile's host).\n"
     "--sweep keeps the tokens per step (batch x micro-batches x seq) and\n"
     "  searches the micro-batch size and count, the prefetch depth (2, 3)\n"
     "  and the recompute policy; it prints the fastest configurations.\n"
     "The figures are predictions of an uncalibrated model: see\n"
     "  docs/simulate.md.\n"
     "--calibrate measures this machine's CPU device (GEMMs, attention,\n"
     "  memory-bound kernels, per-op dispatch, CpuDevice copies, AdamW) with\n"
     "  the runtime's own code and writes the figures as a profile -o\n"
     "  FILE.json for --gpu FILE.json (docs/simulate.md, \"Calibration\");\n"
     "  --threads N: kernel threads (as mtc train --threads); --quick: small\n"
     "  shapes, two repetitions; --repeats N: timed repetitions (21, or 7\n"
     "  for the median);\n"
     "  --statistic best|median: which repetition each figure keeps (best:\n"
     "  the most repeatable on a shared machine)."},
    {"train", mtc::driver::trainUsage(kTool), mtc::driver::trainSummary(kTool),
     runTrain, mtc::driver::trainDetails()},
    {"generate", mtc::driver::generateUsage(kTool),
     mtc::driver::generateSummary(), runGenerate},
    {"gradcheck",
     "mtc gradcheck MODEL.mt|MODEL.mtb|--hf DIR [--batch N] [--seq N] [--seed "
     "N] "
     "[--set NAME=VALUE]... [--tolerance X] [--step X] [--coordinates N] "
     "[--tensors GLOB[,GLOB]...] "
     "[--recompute full|none|selective] [--cpu NAME] [--device "
     "cpu|cuda|cuda-emu [--device-memory SIZE|auto]]",
     "compare the compiled gradients with finite differences on a small "
     "random instance",
     runGradCheck,
     "A tensor fails when its compiled gradient and the finite differences\n"
     "  differ by more than the differences' own error bound (truncation and\n"
     "  the fp32 rounding noise of the loss, both estimated) plus\n"
     "  --tolerance (5e-3) relative.\n"
     "  --tensors checks only the tensors whose names match a glob\n"
     "  ('Block.2.*'). See docs/training.md."},
    {"import-hf", "mtc import-hf DIR|config.json [-o MODEL.mt]",
     "write .mt source for a HuggingFace config.json (docs/hf.md); "
     "compile, train and gradcheck take --hf DIR to import in memory",
     runImportHF},
    {"export-hf",
     "mtc export-hf CHECKPOINT -o DIR [--dtype f32|bf16] [--max-shard-size "
     "SIZE]",
     "write a checkpoint of a HuggingFace-imported model back in HF layout: "
     "model.safetensors (HF names) and config.json (docs/hf.md)",
     runExportHF},
    {"tokenize",
     "mtc tokenize --tokenizer DIR|tokenizer.json INPUT.txt|--text TEXT "
     "[-o OUT.bin] [--print] [--add-special-tokens]\n"
     "       mtc tokenize --tokenizer DIR|tokenizer.json DATA.jsonl "
     "[-o OUT.bin] [--print] [--chat-template FILE.jinja]\n"
     "       mtc tokenize --tokenizer DIR|tokenizer.json --decode "
     "IDS.bin|IDS.txt|--text IDS [-o OUT.txt] [--skip-special-tokens]",
     "encode text with a HuggingFace tokenizer.json into an llm.c token file "
     "for train --data (--print shows the ids, --decode turns ids into text)",
     runTokenize,
     "Encodes exactly as the HuggingFace `tokenizers` library does\n"
     "(Tokenizer.encode(text, add_special_tokens).ids) for byte-level BPE\n"
     "(GPT-2, Llama 3, Qwen2) and SentencePiece-style BPE (Llama 2, Mistral,\n"
     "Gemma); see docs/hf.md. The whole input is one text (UTF-8).\n"
     "-o OUT.bin writes the llm.c layout mtc train --data reads: a 256-int32\n"
     "  header (magic 20240520, version 1: uint16 tokens, or 2: uint32 when\n"
     "  the vocabulary exceeds 65536), then the tokens.\n"
     "--print writes the ids to stdout, separated by spaces.\n"
     "--add-special-tokens applies the post-processor (e.g. BOS first).\n"
     "--decode reads ids (an llm.c .bin, or integers separated by spaces,\n"
     "  commas or newlines) and writes the text; --skip-special-tokens\n"
     "  leaves out special tokens.\n"
     "A .jsonl input is instruction data: one example a line,\n"
     "  {\"prompt\": ..., \"response\": ...[, \"system\": ...]} or\n"
     "  {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}, rendered "
     "with\n"
     "  the tokenizer's chat template (chat_template.jinja or\n"
     "  tokenizer_config.json beside tokenizer.json; --chat-template FILE\n"
     "  overrides it) or mtc's default template (docs/hf.md). -o also writes\n"
     "  OUT.bin.mask, the loss mask: only assistant tokens are trained.\n"
     "  --print shows one example a line, masked ids in brackets."},
    {"help", "mtc help [COMMAND]", "show this list, or one command's usage",
     runHelp},
};

} // namespace

const Command *findCommand(const std::string &name) {
  for (const Command &c : kCommands)
    if (name == c.name)
      return &c;
  return nullptr;
}

void printUsage(std::ostream &os) {
  os << "mtc - compile and train transformer models larger than device "
        "memory\n\n"
        "usage: mtc <command> [options]\n\ncommands:\n";
  for (const Command &c : kCommands)
    os << "  " << c.name << std::string(11 - std::strlen(c.name), ' ')
       << c.summary << "\n";
  os << "\nRun 'mtc help COMMAND' for a command's options.\n";
}

int error(const std::string &message) {
  std::cerr << "mtc: error: " << message << "\n";
  return 1;
}

int runHelp(const std::vector<std::string> &args) {
  if (args.empty()) {
    printUsage(std::cout);
    return 0;
  }
  const Command *c = findCommand(args[0]);
  if (!c)
    return error("unknown command '" + args[0] + "'");
  std::cout << "usage: " << c->usage << "\n" << c->summary << "\n";
  if (!c->details.empty())
    std::cout << "\n" << c->details << "\n";
  return 0;
}

} // namespace mtc::cli

int main(int argc, char **argv) {
  if (argc < 2) {
    mtc::cli::printUsage(std::cerr);
    return 1;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    mtc::cli::printUsage(std::cout);
    return 0;
  }
  const mtc::cli::Command *command = mtc::cli::findCommand(name);
  if (!command) {
    std::cerr << "mtc: error: unknown command '" << name << "'\n\n";
    mtc::cli::printUsage(std::cerr);
    return 1;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  return command->run(args);
}
