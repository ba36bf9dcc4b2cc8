//===- ParamStore.h - Host-resident parameters and optimizer state -*- C++
//-*-===//
//
// Part of mtc. Every parameter instance of a bundle, with its fp32 value,
// gradient and AdamW moments, in host memory. Instance names follow the
// checkpoint convention: model-level `name`, layer instances `Layer.i.name`,
// experts of layer instance i `Layer.i.Expert.e.name`.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_PARAMSTORE_H
#define MTC_RUNTIME_EXEC_PARAMSTORE_H

#include "lib/Bundle/Bundle.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtc::exec {

struct ParamSlot {
  std::string name; ///< checkpoint name
  const bundle::Param *decl = nullptr;
  std::vector<float> value, grad, m, v;
  /// Weight decay applies to matrices (rank >= 2), not to norms and biases.
  bool decay() const { return decl && decl->shape.size() >= 2; }
};

class ParamStore {
public:
  /// Creates one slot per parameter instance (values zero; call initialize).
  explicit ParamStore(const bundle::Bundle &b);

  /// Initialises values as declared (normal, scaled_normal, ...) from a seed;
  /// the result does not depend on the thread count.
  void initialize(uint64_t seed);

  ParamSlot *model(const std::string &name);
  ParamSlot *layer(const std::string &layer, int64_t instance,
                   const std::string &name);
  /// Parameter \p name of expert \p index of \p expert in a layer instance.
  ParamSlot *expert(const std::string &layer, int64_t instance,
                    const std::string &expert, int64_t index,
                    const std::string &name);
  std::vector<ParamSlot> &slots() { return all; }
  const std::vector<ParamSlot> &slots() const { return all; }
  ParamSlot *find(const std::string &name);

  void zeroGrads();
  int64_t totalParams() const;
  /// Bytes of host memory per parameter held here (value, grad, m, v).
  static constexpr int kBytesPerParam = 16;

private:
  const bundle::Bundle &bundle;
  std::vector<ParamSlot> all;
  std::map<std::string, size_t> index;
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_PARAMSTORE_H
