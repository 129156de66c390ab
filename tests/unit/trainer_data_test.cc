// trainer/data: token files (round trip, each malformation named with the file), the
// sources (pure functions of the index, windows of a token file, vocabulary check) and
// the DistributedSampler (every epoch read exactly once, disjointly, for K = 1..4; the
// resume position is exact, also at another world size).
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "trainer/data/mapped_file_faults.h"
#include "trainer/data/sampler.h"
#include "trainer/data/source.h"
#include "trainer/data/token_file.h"

namespace zdp::trainer {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

void write_raw(const std::string& path, const std::vector<int32_t>& header, size_t extra_bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
  const std::string pad(extra_bytes, '\0');
  f.write(pad.data(), static_cast<std::streamsize>(pad.size()));
}

TEST(TokenFile, RoundTripMatchesLlmcLayout) {
  TempDir dir;
  const std::vector<uint16_t> tokens = {0, 1, 255, 65535, 42};
  ASSERT_TRUE(write_token_file(dir.file("a.bin"), tokens).ok());
  // The llm.c layout byte for byte: 1024-byte header, then the tokens.
  EXPECT_EQ(fs::file_size(dir.file("a.bin")), 1024u + 2 * tokens.size());
  std::ifstream raw(dir.file("a.bin"), std::ios::binary);
  int32_t header[3];
  raw.read(reinterpret_cast<char*>(header), sizeof(header));
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5);
  StatusOr<TokenFile> f = TokenFile::open(dir.file("a.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->size(), 5);
  EXPECT_EQ(std::vector<uint16_t>(f->tokens(), f->tokens() + 5), tokens);
}

// Move assignment over an open file: the old one is unmapped and the path moved in. It
// ran the destructor first, which ended the path string's lifetime, and the move into it
// freed its buffer twice (paths longer than the small-string buffer: every real one).
TEST(TokenFile, MoveAssignmentOverAnOpenFileTakesTheOther) {
  TempDir dir;
  ASSERT_TRUE(write_token_file(dir.file("first-file-with-a-long-name.bin"), {1, 2, 3}).ok());
  ASSERT_TRUE(write_token_file(dir.file("second-file-with-a-long-name.bin"), {7, 8}).ok());
  StatusOr<TokenFile> a = TokenFile::open(dir.file("first-file-with-a-long-name.bin"));
  StatusOr<TokenFile> b = TokenFile::open(dir.file("second-file-with-a-long-name.bin"));
  ASSERT_TRUE(a.ok() && b.ok());
  *a = std::move(*b);
  EXPECT_EQ(a->path(), dir.file("second-file-with-a-long-name.bin"));
  ASSERT_EQ(a->size(), 2);
  EXPECT_EQ(std::vector<uint16_t>(a->tokens(), a->tokens() + 2), (std::vector<uint16_t>{7, 8}));
}

TEST(TokenFile, MissingAndMalformedFilesAreNamed) {
  TempDir dir;
  StatusOr<TokenFile> missing = TokenFile::open(dir.file("nope.bin"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.bin"), std::string::npos);

  std::vector<int32_t> header(256, 0);
  write_raw(dir.file("short.bin"), {20240520, 1}, 0);
  header[0] = 12345, header[1] = 1, header[2] = 0;
  write_raw(dir.file("magic.bin"), header, 0);
  header[0] = 20240520, header[1] = 7;
  write_raw(dir.file("version.bin"), header, 0);
  header[1] = 1, header[2] = 10;
  write_raw(dir.file("size.bin"), header, 18);  // 9 tokens where the header says 10
  const std::pair<const char*, const char*> cases[] = {
      {"short.bin", "shorter than"}, {"magic.bin", "magic number 12345"},
      {"version.bin", "version 7"}, {"size.bin", "says 10 tokens"}};
  for (const auto& [name, why] : cases) {
    StatusOr<TokenFile> f = TokenFile::open(dir.file(name));
    ASSERT_FALSE(f.ok()) << name;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(f.status().message().find(name), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find(why), std::string::npos) << f.status().message();
  }
}

// Sizes past 2^62 (data.synthetic_samples is bounded there, but the permutation takes
// any int64): sizing its domain shifted 1 by 64, undefined, and on x86 the loop never
// ended. Distinct inputs must give distinct outputs in [0, n).
// A token file truncated in place under a run (a script that opens it with "wb" again):
// the next read past its new end raises SIGBUS. The rank still dies of it, but names the
// file first (it died as "killed by signal 7" and nothing more).
TEST(TokenFileDeathTest, ATruncatedFileIsNamedWhenItsPagesFault) {
  TempDir dir;
  const std::string path = dir.file("shrinks.bin");
  ASSERT_TRUE(write_token_file(path, std::vector<uint16_t>(1 << 16, 7)).ok());
  EXPECT_EXIT(
      {
        report_mapped_file_faults();
        StatusOr<TokenFile> f = TokenFile::open(path);
        if (!f.ok()) std::_Exit(3);
        if (::truncate(path.c_str(), 0) != 0) std::_Exit(4);
        volatile uint16_t last = f->tokens()[f->size() - 1];  // a page past the new end: SIGBUS
        (void)last;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS),
      "token file '" + path + "' became shorter while it was read .*; the read at byte " +
          std::to_string(kTokenFileHeaderBytes + 2 * ((1 << 16) - 1)) + "\\)");
}

TEST(Permutation, SizesUpToInt64MaxTerminateInRange) {
  for (int64_t n : {int64_t{1} << 62, (int64_t{1} << 62) + 1, std::numeric_limits<int64_t>::max()}) {
    Permutation p(n, 7);
    std::set<int64_t> seen;
    for (int64_t i : {int64_t{0}, int64_t{1}, n / 2, n - 2, n - 1}) {
      const int64_t v = p(i);
      ASSERT_GE(v, 0) << n;
      ASSERT_LT(v, n) << n;
      seen.insert(v);
    }
    EXPECT_EQ(seen.size(), 5u) << n;
  }
}

TEST(Permutation, IsABijectionForOddSizes) {
  for (int64_t n : {1, 2, 3, 7, 100, 1000, 4097}) {
    for (uint64_t key : {0ull, 1ull, 99ull}) {
      Permutation p(n, key);
      std::set<int64_t> seen;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = p(i);
        ASSERT_GE(v, 0);
        ASSERT_LT(v, n);
        seen.insert(v);
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "n " << n << " key " << key;
    }
  }
  // Different keys give different orders (a shuffle, not the identity).
  Permutation a(1000, 1), b(1000, 2);
  int same = 0, fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) same += a(i) == b(i), fixed += a(i) == i;
  EXPECT_LT(same, 20);
  EXPECT_LT(fixed, 20);
}

// Every rank's micro-batches of the steps covering `epochs` epochs: all positions of the
// stream, each read by exactly one rank, and each epoch a permutation of the dataset.
TEST(DistributedSampler, RanksCoverEachEpochExactlyOnceDisjointly) {
  for (int world = 1; world <= 4; ++world) {
    for (const bool shuffle : {true, false}) {
      const int64_t n = 120, micro = 2, accum = 3, global = world * micro * accum;
      const int64_t steps = 2 * n / global + 1;  // past two epochs
      std::vector<int> reads(static_cast<size_t>(steps * global), 0);
      std::vector<std::vector<int64_t>> by_position(static_cast<size_t>(steps * global));
      for (int rank = 0; rank < world; ++rank) {
        StatusOr<DistributedSampler> s = DistributedSampler::create({n, global, micro, world, rank, shuffle, 7});
        ASSERT_TRUE(s.ok()) << s.status().to_string();
        ASSERT_EQ(s->accum_steps(), accum);
        for (int64_t step = 0; step < steps; ++step) {
          for (int64_t m = 0; m < accum; ++m) {
            const std::vector<int64_t> idx = s->micro_batch(step, m);
            ASSERT_EQ(static_cast<int64_t>(idx.size()), micro);
            const int64_t first = step * global + (m * world + rank) * micro;
            for (int64_t k = 0; k < micro; ++k) {
              ++reads[static_cast<size_t>(first + k)];
              EXPECT_EQ(idx[static_cast<size_t>(k)], s->index_at(first + k));
            }
          }
        }
      }
      for (size_t p = 0; p < reads.size(); ++p) ASSERT_EQ(reads[p], 1) << "position " << p << " K " << world;
      StatusOr<DistributedSampler> any = DistributedSampler::create({n, global, micro, world, 0, shuffle, 7});
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        std::set<int64_t> seen;
        for (int64_t p = epoch * n; p < (epoch + 1) * n; ++p) seen.insert(any->index_at(p));
        EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "epoch " << epoch << " K " << world;
      }
      if (shuffle) {
        EXPECT_NE(any->index_at(0), any->index_at(n)) << "epochs should be shuffled differently";
      }
    }
  }
}

// The same global batch read by K = 1, 2, 4: the union of a step's micro-batches is the
// same set of samples, and resuming at step s (a fresh sampler, any K) continues exactly.
TEST(DistributedSampler, GlobalBatchAndResumeDoNotDependOnWorldSize) {
  const int64_t n = 1000, global = 8;
  auto step_samples = [&](int world, int64_t step) {
    std::multiset<int64_t> out;
    const int64_t micro = 2;
    for (int rank = 0; rank < world; ++rank) {
      DistributedSampler s = DistributedSampler::create({n, global, micro, world, rank, true, 3}).value();
      for (int64_t m = 0; m < s.accum_steps(); ++m) {
        for (int64_t i : s.micro_batch(step, m)) out.insert(i);
      }
    }
    return out;
  };
  for (int64_t step : {0, 1, 124, 125, 126, 400}) {  // 125 steps = one epoch
    EXPECT_EQ(step_samples(1, step), step_samples(2, step)) << "step " << step;
    EXPECT_EQ(step_samples(1, step), step_samples(4, step)) << "step " << step;
  }
  DistributedSampler s = DistributedSampler::create({n, global, 2, 2, 0, true, 3}).value();
  EXPECT_EQ(s.position_of_step(126), 126 * global);
}

// A run saved at step 10 with global batch 8 (position 80) and resumed with global batch
// 16: step 10 starts at sample position 80, step 11 at 96; the old batch's samples are
// neither skipped nor read twice.
TEST(DistributedSampler, ResumeWithAnotherGlobalBatchContinuesAtTheSavedPosition) {
  const int64_t n = 1000;
  SamplerOptions before{n, 8, 2, 2, 0, true, 3};
  DistributedSampler old_sampler = DistributedSampler::create(before).value();
  SamplerOptions after{n, 16, 2, 4, 1, true, 3};
  after.start_step = 10;
  after.start_position = old_sampler.position_of_step(10);
  DistributedSampler s = DistributedSampler::create(after).value();
  EXPECT_EQ(s.position_of_step(10), 80);
  EXPECT_EQ(s.position_of_step(11), 96);
  // Rank 1 of 4, micro-batch 1 of step 11: positions 96 + (1 x 4 + 1) x 2 = 106, 107.
  EXPECT_EQ(s.micro_batch(11, 1), (std::vector<int64_t>{s.index_at(106), s.index_at(107)}));
  after.start_position = -1;
  EXPECT_FALSE(DistributedSampler::create(after).ok());
}

// A damaged or hand-made resume point at the end of int64 is refused at once (it used to
// overflow the position arithmetic and spin in the permutation's cycle walk forever), and
// a run whose last step would pass 2^62 samples is refused before its first step.
TEST(DistributedSampler, ExtremePositionsAreRefusedNotOverflowed) {
  SamplerOptions o{1000, 8, 2, 2, 0, true, 3};
  o.start_step = 10;
  o.start_position = std::numeric_limits<int64_t>::max();
  StatusOr<DistributedSampler> max = DistributedSampler::create(o);
  ASSERT_FALSE(max.ok());
  EXPECT_NE(max.status().message().find("beyond 2^62"), std::string::npos) << max.status().message();
  o.start_position = kMaxPosition;
  o.last_step = 10 + (int64_t{1} << 40);
  StatusOr<DistributedSampler> long_run = DistributedSampler::create(o);
  ASSERT_FALSE(long_run.ok());
  EXPECT_NE(long_run.status().message().find("would read beyond position 2^62"), std::string::npos)
      << long_run.status().message();
  o.start_position = kMaxPosition - 8;  // the last step fits exactly: it ends at 2^62
  o.last_step = 11;
  DistributedSampler s = DistributedSampler::create(o).value();
  for (int64_t m = 0; m < s.accum_steps(); ++m) {
    for (int64_t i : s.micro_batch(10, m)) EXPECT_TRUE(i >= 0 && i < 1000) << i;
  }
  EXPECT_LT(s.index_at(kMaxPosition), 1000);  // terminates, in range
}

TEST(DistributedSampler, InconsistentGeometryIsRefused) {
  StatusOr<DistributedSampler> s = DistributedSampler::create({100, 10, 4, 2, 0, true, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("global_batch (10)"), std::string::npos) << s.status().message();
  EXPECT_FALSE(DistributedSampler::create({0, 8, 4, 2, 0, true, 0}).ok());
  EXPECT_FALSE(DistributedSampler::create({10, 8, 4, 2, 2, true, 0}).ok());
}

Config gpt_config() {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.seq_len = 4;
  c.model.vocab_size = 256;
  return c;
}

TEST(Sources, TokenFileWindowsShiftTargetsByOne) {
  TempDir dir;
  std::vector<uint16_t> tokens(14);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(100 + i);
  ASSERT_TRUE(write_token_file(dir.file("t.bin"), tokens).ok());
  Config c = gpt_config();
  c.data.kind = DataKind::kTokens;
  c.data.path = dir.file("t.bin");
  std::unique_ptr<DataSource> src = make_source(c, Split::kTrain).value();
  ASSERT_EQ(src->size(), 3);  // (14 - 1) / 4 windows of 5 tokens
  Batch b;
  ASSERT_TRUE(src->fill({2, 0}, &b).ok());
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{108, 109, 110, 111, 100, 101, 102, 103}));
  EXPECT_EQ(b.labels, (std::vector<int32_t>{109, 110, 111, 112, 101, 102, 103, 104}));
  // No held-out file configured: no held-out source.
  EXPECT_EQ(make_source(c, Split::kVal).value(), nullptr);
  // A token outside the vocabulary is named with its file and position.
  c.model.vocab_size = 110;
  src = make_source(c, Split::kTrain).value();
  Status s = src->fill({2}, &b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("t.bin"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("token 110 at position 10"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("in sample 2 of data.path"), std::string::npos) << s.message();
  // A missing file names the config key and the file.
  c.data.path = dir.file("missing.bin");
  StatusOr<std::unique_ptr<DataSource>> missing = make_source(c, Split::kTrain);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.bin"), std::string::npos);
}

// data.path as a glob of shards (llm.c's fineweb_train_*.bin): the shards in name order,
// each sample a window inside one shard, every error naming the shard it is about.
TEST(Sources, ShardsByAGlobNumberTheirWindowsInNameOrder) {
  TempDir dir;
  auto shard = [&](const std::string& name, uint16_t first, size_t count) {
    std::vector<uint16_t> tokens(count);
    for (size_t i = 0; i < count; ++i) tokens[i] = static_cast<uint16_t>(first + i);
    ASSERT_TRUE(write_token_file(dir.file(name), tokens).ok());
  };
  shard("s_10.bin", 200, 9);  // "s_10" sorts before "s_2": the name's bytes decide
  shard("s_2.bin", 100, 14);
  shard("other.bin", 0, 100);  // not matched
  Config c = gpt_config();      // seq_len 4: windows of 5 tokens every 4
  c.data.kind = DataKind::kTokens;
  c.data.path = dir.file("s_*.bin");
  std::unique_ptr<DataSource> src = make_source(c, Split::kTrain).value();
  ASSERT_EQ(src->size(), 2 + 3);  // (9 - 1) / 4 + (14 - 1) / 4
  EXPECT_NE(src->describe().find("2 files, 23 tokens, 5 samples of 4"), std::string::npos) << src->describe();
  Batch b;
  ASSERT_TRUE(src->fill({1, 2, 4}, &b).ok());
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{204, 205, 206, 207, 100, 101, 102, 103, 108, 109, 110, 111}));
  EXPECT_EQ(b.labels, (std::vector<int32_t>{205, 206, 207, 208, 101, 102, 103, 104, 109, 110, 111, 112}));
  // A token outside the vocabulary names its shard and its position there.
  c.model.vocab_size = 205;
  Status s = make_source(c, Split::kTrain).value()->fill({0, 1}, &b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("token file '" + dir.file("s_10.bin") + "': token 205 at position 5"), std::string::npos)
      << s.message();
  c.model.vocab_size = gpt_config().model.vocab_size;
  // A shard shorter than one sample, and a pattern matching nothing, are named.
  shard("s_3.bin", 0, 4);
  StatusOr<std::unique_ptr<DataSource>> short_shard = make_source(c, Split::kTrain);
  ASSERT_FALSE(short_shard.ok());
  EXPECT_NE(short_shard.status().message().find("token file '" + dir.file("s_3.bin") + "': 4 tokens, fewer than"),
            std::string::npos) << short_shard.status().message();
  c.data.path = dir.file("t_*.bin");
  StatusOr<std::unique_ptr<DataSource>> none = make_source(c, Split::kTrain);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("token files '" + dir.file("t_*.bin") + "': no file matches"),
            std::string::npos) << none.status().message();
  c.data.path = dir.file("missing/*.bin");
  none = make_source(c, Split::kTrain);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("cannot read the folder '" + dir.file("missing") + "'"), std::string::npos)
      << none.status().message();
}

// dp-data text writes DIR/train.bin and DIR/val.bin: data.path = "DIR/*.bin" trained on
// the held-out file too, and the held-out loss measured nothing (found by a review: no
// check compared the two sets). A hard link under another name is the same file.
TEST(Sources, HeldOutFilesMustNotBeTrainingFiles) {
  TempDir dir;
  const std::vector<uint16_t> tokens(40, 7);
  ASSERT_TRUE(write_token_file(dir.file("train.bin"), tokens).ok());
  ASSERT_TRUE(write_token_file(dir.file("val.bin"), tokens).ok());
  Config c = gpt_config();
  c.data.kind = DataKind::kTokens;
  c.data.path = dir.file("*.bin");
  c.data.val_path = dir.file("val.bin");
  StatusOr<std::unique_ptr<DataSource>> val = make_source(c, Split::kVal);
  ASSERT_FALSE(val.ok());
  EXPECT_NE(val.status().message().find("data.val_path"), std::string::npos) << val.status().message();
  EXPECT_NE(val.status().message().find("the held-out file '" + dir.file("val.bin") + "' is also a training file"),
            std::string::npos)
      << val.status().message();
  c.data.path = dir.file("train.bin");
  ASSERT_TRUE(make_source(c, Split::kVal).ok());
  fs::create_directory(dir.file("other"));
  fs::create_hard_link(dir.file("train.bin"), dir.file("other/held.bin"));
  c.data.val_path = dir.file("other/held.bin");
  EXPECT_FALSE(make_source(c, Split::kVal).ok());
}

// A folder or file whose name holds glob characters is itself when it exists ("no file
// matches the pattern" before, for a file that was there).
TEST(Sources, ALiteralPathWithGlobCharactersIsAFile) {
  TempDir dir;
  fs::create_directory(dir.file("run[1]"));
  ASSERT_TRUE(write_token_file(dir.file("run[1]/train.bin"), std::vector<uint16_t>(40, 7)).ok());
  Config c = gpt_config();
  c.data.kind = DataKind::kTokens;
  c.data.path = dir.file("run[1]/train.bin");
  StatusOr<std::unique_ptr<DataSource>> src = make_source(c, Split::kTrain);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_EQ((*src)->size(), 9);  // (40 - 1) / 4
  c.data.path = dir.file("run[2]/train.bin");
  src = make_source(c, Split::kTrain);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("write \\[ for a literal '['"), std::string::npos) << src.status().message();
}

TEST(Sources, SyntheticSamplesArePureFunctionsOfTheIndex) {
  for (const ModelKind kind : {ModelKind::kMlp, ModelKind::kGpt}) {
    Config c = gpt_config();
    c.model.kind = kind;
    c.model.d_model = 8;
    c.model.vocab_size = 5;
    std::unique_ptr<DataSource> train = make_source(c, Split::kTrain).value();
    std::unique_ptr<DataSource> val = make_source(c, Split::kVal).value();
    Batch a, b, v;
    ASSERT_TRUE(train->fill({3, 9, 3}, &a).ok());
    ASSERT_TRUE(train->fill({9}, &b).ok());
    ASSERT_TRUE(val->fill({3, 9, 3}, &v).ok());
    if (kind == ModelKind::kMlp) {
      EXPECT_EQ(std::vector<float>(a.features.begin() + 8, a.features.begin() + 16), b.features);
      EXPECT_EQ(std::vector<float>(a.features.begin(), a.features.begin() + 8),
                std::vector<float>(a.features.begin() + 16, a.features.end()));
      EXPECT_NE(a.features, v.features);  // the held-out split is another stream
      for (int32_t l : a.labels) EXPECT_TRUE(l >= 0 && l < 5);
    } else {
      EXPECT_EQ(std::vector<int32_t>(a.tokens.begin() + 4, a.tokens.begin() + 8), b.tokens);
      EXPECT_NE(a.tokens, v.tokens);
      // Labels are the inputs shifted by one position.
      EXPECT_EQ(std::vector<int32_t>(a.tokens.begin() + 1, a.tokens.begin() + 4),
                std::vector<int32_t>(a.labels.begin(), a.labels.begin() + 3));
    }
  }
}

TEST(Sources, ByteTokensAndMarkovTokens) {
  EXPECT_EQ(byte_tokens("a\xff"), (std::vector<uint16_t>{97, 255}));
  const std::vector<uint16_t> m = markov_tokens(1000, 50, 1);
  std::set<std::pair<int, int>> pairs;
  for (size_t i = 1; i < m.size(); ++i) {
    ASSERT_LT(m[i], 50);
    pairs.insert({m[i - 1], m[i]});
  }
  std::set<int> firsts;
  for (auto& p : pairs) firsts.insert(p.first);
  EXPECT_LE(pairs.size(), firsts.size() * 4);  // at most 4 successors per token
  EXPECT_EQ(markov_tokens(1000, 50, 1), m);
}

}  // namespace
}  // namespace zdp::trainer
