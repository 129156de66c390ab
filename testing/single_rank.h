// A world of one rank for the engine's unit tests: Gloo, hence the CPU device, even on a
// machine with a GPU (kAuto would pick NCCL there). Expects success (a failed init is a
// test failure, and the Context then holds nothing usable).
#pragma once

#include <utility>

#include <gtest/gtest.h>

#include "zdp/context.h"

namespace zdp::testing {

inline Context single_rank_context() {
  InitOptions options;
  options.backend = Backend::kGloo;
  StatusOr<Context> ctx = init(options);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  return std::move(*ctx);
}

}  // namespace zdp::testing
