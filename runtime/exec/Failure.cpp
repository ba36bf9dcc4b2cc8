//===- Failure.cpp - How a failure inside the executor unwinds -----------===//
//
// Part of mtc. See Failure.h. The thrown type derives from std::exception so
// that a device running a launched closure that raised keeps its message.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Failure.h"

#include <stdexcept>

namespace mtc::exec {

namespace {

class Raised : public std::runtime_error {
public:
  explicit Raised(const std::string &message) : std::runtime_error(message) {}
};

} // namespace

void raise(std::string message) { throw Raised(message); }

Status catchRaised(const std::function<void()> &body) {
  try {
    body();
    return Status::success();
  } catch (const Raised &e) {
    return Status::error(e.what());
  }
}

} // namespace mtc::exec
