// A parameter's name is its checkpoint's tensor name (a safetensors JSON key): add_param
// refuses what no save could write. Registered, "__metadata__" failed every save of the
// run after its training, and a name that is not UTF-8 threw the json library's exception
// out of save_checkpoint on rank 0.
#include <gtest/gtest.h>

#include <string>

#include "testing/single_rank.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp {
namespace {

TEST(ParamNames, WhatNoCheckpointCanHoldIsRefusedAtAddParam) {
  Context ctx = testing::single_rank_context();
  Engine engine(ctx, EngineOptions{});
  auto refused = [&](const std::string& name, const std::string& says) {
    StatusOr<Param> p = engine.add_param(name, {3}, Init::zeros(), 0);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(says), std::string::npos) << p.status().message();
  };
  refused("__metadata__", "safetensors' reserved key");
  refused("w\xff", "[3]): the name is not UTF-8 (byte 1)");
  refused("w\xc3", "not UTF-8 (byte 1)");            // a truncated sequence
  refused("ab\xed\xa0\x80", "not UTF-8 (byte 2)");  // a UTF-16 surrogate
  EXPECT_TRUE(engine.add_param("blöck.0", {3}, Init::zeros(), 0).ok()) << "UTF-8 is a name";
  EXPECT_TRUE(engine.add_param("__metadata", {3}, Init::zeros(), 0).ok());
  EXPECT_TRUE(engine.finalize().ok()) << "a refused add_param is no failure of the engine";
}

}  // namespace
}  // namespace zdp
