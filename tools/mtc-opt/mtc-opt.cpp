//===- mtc-opt.cpp - Pass driver for mtc's dialects and passes --*- C++ -*-===//
//
// Part of mtc. Registers every mtc dialect and pass (and MLIR's generic
// transforms such as -canonicalize and -cse) and hands over to MlirOptMain, so
// any stage of the pipeline can be run, printed and tested with FileCheck.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/mt/MtDialect.h"
#include "dialects/stream/StreamDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mtc::mt::MtDialect, mtc::stream::StreamDialect,
                  mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  mtc::registerMtcTransformsPasses();
  mtc::registerMtcPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mtc optimizer driver\n", registry));
}
