// Placeholder until the gpt model lands.
#include "trainer/models/model.h"

namespace zdp::trainer {

StatusOr<std::unique_ptr<Model>> make_gpt(const ModelConfig&, int64_t, Ops&) {
  return Status(StatusCode::kUnavailable, "model.kind = \"gpt\" is not implemented yet");
}

}  // namespace zdp::trainer
