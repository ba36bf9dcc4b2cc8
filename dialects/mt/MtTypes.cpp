//===- MtTypes.cpp - Types of the mt dialect --------------------*- C++ -*-===//
//
// Part of mtc. `!mt.tensor<[B, S, 256], f32>`: parsing, printing, verifying.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/MtDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mtc::mt;

#define GET_TYPEDEF_CLASSES
#include "dialects/mt/MtTypes.cpp.inc"

void MtDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/mt/MtTypes.cpp.inc"
      >();
}

Type MtTensorType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  if (parser.parseLess())
    return {};
  auto parseDim = [&]() -> ParseResult {
    StringRef keyword;
    SMLoc loc = parser.getCurrentLocation();
    if (succeeded(parser.parseOptionalKeyword(&keyword))) {
      mtc::Dim d = mtc::symbolicDimByName(keyword.str());
      if (d == 0)
        return parser.emitError(loc, "unknown symbolic dimension '")
               << keyword << "' (expected B, S or T)";
      shape.push_back(d);
      return success();
    }
    int64_t value;
    if (parser.parseInteger(value))
      return failure();
    if (value < 0)
      return parser.emitError(loc, "dimension must be non-negative");
    shape.push_back(value);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim) ||
      parser.parseComma() || parser.parseType(elementType) ||
      parser.parseGreater())
    return {};
  return parser.getChecked<MtTensorType>(parser.getContext(), shape,
                                         elementType);
}

void MtTensorType::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getShape(), printer,
                        [&](int64_t d) { printer << mtc::formatDim(d); });
  printer << "], " << getElementType() << ">";
}

LogicalResult MtTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<int64_t> shape, Type elementType) {
  for (int64_t d : shape)
    if (d < 0 && d != mtc::kDimB && d != mtc::kDimS && d != mtc::kDimT)
      return emitError() << "invalid dimension " << d;
  if (!elementType.isF32() && !elementType.isBF16() &&
      !elementType.isInteger(32))
    return emitError() << "element type must be f32, bf16 or i32, got "
                       << elementType;
  return success();
}
