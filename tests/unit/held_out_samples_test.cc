// The held-out samples an evaluation reads (DataSource::held_out_sample) and the check of
// their tokens before the first step (check_held_out_samples), trainer/data/source.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "testing/temp_dir.h"
#include "trainer/data/source.h"
#include "trainer/data/token_file.h"

namespace zdp::trainer {
namespace {

using testing::TempDir;

// An evaluation of n samples reads a token file's samples i x N / n: the file keeps its
// origin's order (dp-data writes each input file's tail after the previous one's), and
// the first n were one input file's. Synthetic samples are independent draws: the first n.
// The check before the first step reads the same ones (a bad token in the last sample).
TEST(Sources, AnEvaluationSpreadsOverATokenFileAndChecksWhatItReads) {
  TempDir dir;
  std::vector<uint16_t> tokens(41, 1);  // 10 windows of 5 tokens at seq_len 4
  tokens[40] = 300;                      // the last token of the last sample
  ASSERT_TRUE(write_token_file(dir.file("val.bin"), tokens).ok());
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.seq_len = 4;
  c.model.vocab_size = 256;
  c.data.kind = DataKind::kTokens;
  c.data.path = dir.file("val.bin");
  std::unique_ptr<DataSource> val = make_source(c, Split::kTrain).value();
  ASSERT_EQ(val->size(), 10);
  std::vector<int64_t> read;
  for (int64_t i = 0; i < 4; ++i) read.push_back(val->held_out_sample(i, 4));
  EXPECT_EQ(read, (std::vector<int64_t>{0, 2, 5, 7}));
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(val->held_out_sample(i, 10), i) << "all of it: each once";
  EXPECT_TRUE(check_held_out_samples(*val, 2).ok()) << "samples 0 and 5";
  const Status last = check_held_out_samples(*val, 10);
  ASSERT_FALSE(last.ok());
  EXPECT_NE(last.message().find("token 300 at position 40"), std::string::npos) << last.message();
  c.data.kind = DataKind::kSynthetic;
  std::unique_ptr<DataSource> synthetic = make_source(c, Split::kVal).value();
  EXPECT_EQ(synthetic->held_out_sample(3, 4), 3);
}

}  // namespace
}  // namespace zdp::trainer
