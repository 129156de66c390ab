// Where samples come from: a dataset of size() samples, each a pure function of its
// index, so the sampler alone decides who reads what. Three sources:
//   synthetic features (mlp): inputs drawn from (seed, split, index), labels or targets
//     from a fixed random teacher network, so the task is learnable;
//   synthetic tokens (gpt): sequences of a seeded Markov chain with 4 successors per
//     token (the best possible loss is ln 4 = 1.386 nats);
//   a token file (gpt): sample i is the window of seq_len + 1 tokens starting at
//     i x seq_len (inputs are its first seq_len tokens, targets its last seq_len).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zdp/config.h"
#include "zdp/status.h"

namespace zdp::trainer {

// One micro-batch on the host. The model says which fields it reads.
struct Batch {
  int64_t count = 0;              // samples
  std::vector<float> features;    // mlp: count x d_model
  std::vector<float> targets;     // mlp regression: count x vocab_size
  std::vector<int32_t> labels;    // mlp classification: count; gpt: count x seq_len next tokens
  std::vector<int32_t> tokens;    // gpt: count x seq_len inputs
};

enum class Split { kTrain = 0, kVal };
const char* to_string(Split split);

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual int64_t size() const = 0;
  // "synthetic tokens (vocab 256, 65536 samples)", "tokens data/train.bin (1.2M tokens)".
  virtual std::string describe() const = 0;
  // Replaces `batch` with the samples at `indices` (each < size()). kInvalidArgument names
  // the file and position of a token outside the vocabulary.
  virtual Status fill(const std::vector<int64_t>& indices, Batch* batch) const = 0;
  // What every rank must agree on beyond size() (same_data.h): a token file's sampled
  // digest (TokenShards::fingerprint); a synthetic source's describe() and seed.
  virtual std::string fingerprint() const = 0;
  // A token file changed in place since it was opened (TokenFile::check_unchanged):
  // kIoError naming it. Synthetic sources have no files.
  virtual Status check_unchanged() const { return Status::Ok(); }
  virtual int64_t file_count() const { return 0; }  // the files check_unchanged() stats
  // The sample an evaluation of `count` samples (count <= size()) reads as its i-th.
  // Synthetic samples are independent draws: the first `count` are as good as any. A
  // token file keeps its origin's order (dp-data puts each input file's tail after the
  // previous one's), so its evaluation spreads over the whole file: the first 128 samples
  // of the quickstart's val.bin were the tail of one input file of 43.
  virtual int64_t held_out_sample(int64_t i, int64_t /*count*/) const { return i; }
};

// The source of `split` for config.model/config.data. The held-out split of a token file
// is data.val_path (nullptr without one); synthetic sources draw it from another stream.
StatusOr<std::unique_ptr<DataSource>> make_source(const Config& config, Split split);

// Fills the samples an evaluation of `count` reads (held_out_sample of 0 .. count - 1, in
// bounded batches) to check their tokens before the first step (a token outside the
// vocabulary in the held-out file failed the run after its last step, before the final
// checkpoint was saved).
Status check_held_out_samples(const DataSource& source, int64_t count);

// Byte-level corpus helpers of dp-data: each byte of the text is one token (vocab 256).
std::vector<uint16_t> byte_tokens(const std::string& text);
// `count` tokens of the synthetic Markov chain (the gpt synthetic source's process).
std::vector<uint16_t> markov_tokens(int64_t count, int vocab, uint64_t seed);

}  // namespace zdp::trainer
