// The compressed-communication keys: zero.reduce_dtype = "int8" | "int4" (reduce_quant,
// with the fp32 sum), zero.gather_dtype, zero.error_feedback; their round trip through
// TOML, and the combinations refused at config validation, each naming file:line and key.
#include <gtest/gtest.h>

#include "zdp/config.h"
#include "zdp/engine.h"

namespace zdp {
namespace {

std::string problems(const std::string& text) {
  StatusOr<Config> c = parse_config(text, "configs/q.toml");
  if (!c.ok()) return c.status().message();
  const Status s = validate_for_world(*c, 2);
  return s.ok() ? "" : s.message();
}

TEST(ConfigQuant, Int8AndInt4SetTheWireFormatAndSumInFp32) {
  StatusOr<Config> c = parse_config("[zero]\nstage = 2\nreduce_dtype = \"int8\"\ngather_dtype = \"int8\"\n", "q.toml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->zero.reduce_quant, WireQuant::kInt8);
  EXPECT_EQ(c->zero.reduce_dtype, DType::kF32);
  EXPECT_EQ(c->zero.gather_quant, WireQuant::kInt8);
  EXPECT_TRUE(c->zero.error_feedback);
  // Round trip: the TOML written back reads as the same config.
  StatusOr<Config> again = parse_config(to_toml(*c), "again.toml");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(*again, *c);

  c = parse_config("[zero]\nreduce_dtype = \"int4\"\nerror_feedback = false\n", "q.toml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->zero.reduce_quant, WireQuant::kInt4);
  EXPECT_FALSE(c->zero.error_feedback);
  c = parse_config("[zero]\nreduce_dtype = \"bf16\"\n", "q.toml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->zero.reduce_quant, WireQuant::kNone);
  EXPECT_EQ(c->zero.reduce_dtype, DType::kBF16);
}

TEST(ConfigQuant, RefusedWhereItCannotApply) {
  // Deterministic mode promises bits that do not depend on the world size.
  std::string e = problems("[train]\ndeterministic = true\n[zero]\nstage = 2\nreduce_dtype = \"int8\"\n");
  EXPECT_NE(e.find("configs/q.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("train.deterministic = true"), std::string::npos) << e;
  EXPECT_NE(e.find("zero.reduce_dtype = \"int8\""), std::string::npos) << e;
  e = problems("[train]\ndeterministic = true\n[zero]\ngather_dtype = \"int8\"\n");
  EXPECT_NE(e.find("zero.gather_dtype = \"int8\""), std::string::npos) << e;
  EXPECT_NE(e.find("zero.reduce_dtype = \"fp32\""), std::string::npos) << e;  // the dtype in effect, not "none"
  // Stage 0 all-reduces: there is no reduce-scatter to quantize and nothing to gather.
  e = problems("[zero]\nstage = 0\nreduce_dtype = \"int4\"\n");
  EXPECT_NE(e.find("configs/q.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("zero.stage is 0"), std::string::npos) << e;
  e = problems("[zero]\nstage = 0\ngather_dtype = \"int8\"\n");
  EXPECT_NE(e.find("zero.gather_dtype"), std::string::npos) << e;
  // A switch without its subject.
  e = problems("[zero]\nerror_feedback = false\n");
  EXPECT_NE(e.find("configs/q.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("only applies to a quantized reduce_dtype"), std::string::npos) << e;
  // Unknown words name the allowed ones.
  e = problems("[zero]\nreduce_dtype = \"int2\"\n");
  EXPECT_NE(e.find("\"int8\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"int4\""), std::string::npos) << e;
  e = problems("[zero]\ngather_dtype = \"int4\"\n");
  EXPECT_NE(e.find("zero.gather_dtype"), std::string::npos) << e;
  // And what is allowed passes.
  EXPECT_EQ(problems("[zero]\nstage = 1\nreduce_dtype = \"int8\"\ngather_dtype = \"int8\"\n"), "");
  EXPECT_EQ(problems("[zero]\nstage = 3\naccumulate = \"sharded\"\nreduce_dtype = \"int4\"\n[train]\naccum_steps = 2\n"
                     "global_batch = 4\n"),
            "");
}

// zero.compress chooses the peers that quantization applies to; without quantization it
// has nothing to choose, and says so. Deterministic mode refuses it through the dtypes.
TEST(ConfigQuant, CompressScope) {
  StatusOr<Config> c = parse_config("[zero]\nreduce_dtype = \"int8\"\ncompress = \"inter-node\"\n", "q.toml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->zero.compress, CompressScope::kInterNode);
  StatusOr<Config> again = parse_config(to_toml(*c), "again.toml");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->zero.compress, CompressScope::kInterNode);
  EXPECT_EQ(parse_config("[zero]\n", "q.toml")->zero.compress, CompressScope::kAll);
  EXPECT_EQ(problems("[zero]\ngather_dtype = \"int8\"\ncompress = \"inter-node\"\n"), "");
  std::string e = problems("[zero]\ncompress = \"inter-node\"\n");
  EXPECT_NE(e.find("configs/q.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("nothing is quantized"), std::string::npos) << e;
  e = problems("[zero]\ncompress = \"intra-node\"\n");
  EXPECT_NE(e.find("\"inter-node\""), std::string::npos) << e;
  e = problems("[train]\ndeterministic = true\n[zero]\nreduce_dtype = \"int8\"\ncompress = \"inter-node\"\n");
  EXPECT_NE(e.find("train.deterministic = true"), std::string::npos) << e;
}

// The engine's own options (a trainer that fills them in code) are held to the same rule.
TEST(ConfigQuant, EngineOptionsRefuseDeterministicWithQuantization) {
  EngineOptions o;
  o.zero.reduce_quant = WireQuant::kInt8;
  EXPECT_TRUE(o.validate().ok()) << o.validate().to_string();
  o.deterministic = true;
  const Status s = o.validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("train.deterministic = true"), std::string::npos) << s.message();
  o.zero.stage = 0;
  EXPECT_NE(o.validate().message().find("zero.stage is 0"), std::string::npos) << o.validate().message();
}

}  // namespace
}  // namespace zdp
