// The three data sources behind make_source(): synthetic features, synthetic tokens, token files.
#include "trainer/data/source.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>
#include <utility>

#include "trainer/data/token_shards.h"

namespace zdp::trainer {
namespace {

uint64_t mix(uint64_t x) {  // SplitMix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t hash(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) { return mix(mix(mix(mix(a) ^ b) ^ c) ^ d); }
// A uniform float in [-1, 1) from 53 hash bits.
float uniform(uint64_t h) { return static_cast<float>(static_cast<double>(h >> 11) * 0x1p-52 - 1.0); }

// Held-out samples of the synthetic sources: the same process on another random stream.
constexpr int64_t kSyntheticValSamples = 4096;
constexpr int kMarkovSuccessors = 4;

// The teacher of the synthetic features: y = W2 tanh(W1 x), W1 [kHidden, in] and W2
// [out, kHidden] uniform with unit-variance rows, fixed by the seed. One copy for both
// splits (out x 32 floats: 4 GiB at 2^25 classes, each split held its own).
constexpr int kHidden = 32;
struct Teacher {
  std::vector<float> w1, w2;
};
std::shared_ptr<const Teacher> shared_teacher(int64_t in, int64_t out, uint64_t seed) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, uint64_t>, std::weak_ptr<const Teacher>> made;
  std::lock_guard<std::mutex> lock(mu);
  std::weak_ptr<const Teacher>& slot = made[{in, out, seed}];
  if (std::shared_ptr<const Teacher> t = slot.lock()) return t;
  auto t = std::make_shared<Teacher>();
  t->w1.resize(static_cast<size_t>(kHidden * in));
  t->w2.resize(static_cast<size_t>(out * kHidden));
  const float s1 = std::sqrt(3.0f / static_cast<float>(in)), s2 = std::sqrt(3.0f / kHidden);
  for (size_t i = 0; i < t->w1.size(); ++i) t->w1[i] = s1 * uniform(hash(seed, 0x7e1, i));
  for (size_t i = 0; i < t->w2.size(); ++i) t->w2[i] = s2 * uniform(hash(seed, 0x7e2, i));
  slot = t;
  return t;
}

class SyntheticFeatures : public DataSource {
 public:
  SyntheticFeatures(const Config& c, Split split)
      : in_(c.model.d_model), out_(c.model.vocab_size), task_(c.model.task), seed_(static_cast<uint64_t>(c.train.seed)),
        split_(split), size_(split == Split::kTrain ? c.data.synthetic_samples : kSyntheticValSamples),
        teacher_(shared_teacher(in_, out_, seed_)), w1_(teacher_->w1), w2_(teacher_->w2) {}
  int64_t size() const override { return size_; }
  std::string describe() const override {
    return std::string("synthetic ") + to_string(task_) + " (" + std::to_string(in_) + " features -> " +
           std::to_string(out_) + (task_ == MlpTask::kClassification ? " classes, " : " outputs, ") +
           std::to_string(size_) + " " + to_string(split_) + " samples)";
  }
  std::string fingerprint() const override { return describe() + ", seed " + std::to_string(seed_); }
  Status fill(const std::vector<int64_t>& indices, Batch* b) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    b->count = n;
    b->features.resize(static_cast<size_t>(n * in_));
    b->labels.assign(task_ == MlpTask::kClassification ? static_cast<size_t>(n) : 0, 0);
    b->targets.resize(task_ == MlpTask::kRegression ? static_cast<size_t>(n * out_) : 0);
    std::vector<float> h(kHidden), y(static_cast<size_t>(out_));
    for (int64_t s = 0; s < n; ++s) {
      float* x = &b->features[static_cast<size_t>(s * in_)];
      for (int64_t j = 0; j < in_; ++j) {
        x[j] = uniform(hash(seed_, static_cast<uint64_t>(split_) + 1, static_cast<uint64_t>(indices[s]), j));
      }
      for (int k = 0; k < kHidden; ++k) {
        float z = 0;
        for (int j = 0; j < in_; ++j) z += w1_[static_cast<size_t>(k * in_ + j)] * x[j];
        h[static_cast<size_t>(k)] = std::tanh(z);
      }
      for (int64_t o = 0; o < out_; ++o) {
        float z = 0;
        for (int k = 0; k < kHidden; ++k) z += w2_[static_cast<size_t>(o * kHidden + k)] * h[static_cast<size_t>(k)];
        y[static_cast<size_t>(o)] = z;
      }
      if (task_ == MlpTask::kClassification) {
        b->labels[static_cast<size_t>(s)] = static_cast<int32_t>(std::max_element(y.begin(), y.end()) - y.begin());
      } else {
        std::copy(y.begin(), y.end(), b->targets.begin() + s * out_);
      }
    }
    return Status::Ok();
  }

 private:
  int64_t in_, out_;  // int64: out_ x kHidden passes 2^31 at 2^26 classes
  MlpTask task_;
  uint64_t seed_;
  Split split_;
  int64_t size_;
  std::shared_ptr<const Teacher> teacher_;
  const std::vector<float>& w1_;
  const std::vector<float>& w2_;
};

// Fills b->tokens / b->labels from windows of seq_len + 1 tokens given by `token_at`.
template <typename TokenAt>
void fill_windows(const std::vector<int64_t>& indices, int seq_len, Batch* b, TokenAt&& token_at) {
  const int64_t n = static_cast<int64_t>(indices.size());
  b->count = n;
  b->tokens.resize(static_cast<size_t>(n * seq_len));
  b->labels.resize(static_cast<size_t>(n * seq_len));
  for (int64_t s = 0; s < n; ++s) {
    int32_t prev = token_at(indices[static_cast<size_t>(s)], 0);
    for (int t = 0; t < seq_len; ++t) {
      const int32_t next = token_at(indices[static_cast<size_t>(s)], t + 1);
      b->tokens[static_cast<size_t>(s * seq_len + t)] = prev;
      b->labels[static_cast<size_t>(s * seq_len + t)] = next;
      prev = next;
    }
  }
}

int32_t markov_next(int32_t token, int vocab, uint64_t seed, uint64_t draw) {
  const uint64_t k = draw % kMarkovSuccessors;
  return static_cast<int32_t>(hash(seed, 0x3a2c, static_cast<uint64_t>(token), k) % static_cast<uint64_t>(vocab));
}

class SyntheticTokens : public DataSource {
 public:
  SyntheticTokens(const Config& c, Split split)
      : vocab_(c.model.vocab_size), seq_len_(c.model.seq_len), seed_(static_cast<uint64_t>(c.train.seed)),
        split_(split), size_(split == Split::kTrain ? c.data.synthetic_samples : kSyntheticValSamples) {}
  int64_t size() const override { return size_; }
  std::string describe() const override {
    return "synthetic Markov tokens (vocab " + std::to_string(vocab_) + ", " + std::to_string(kMarkovSuccessors) +
           " successors each, " + std::to_string(size_) + " " + to_string(split_) + " samples)";
  }
  std::string fingerprint() const override { return describe() + ", seed " + std::to_string(seed_); }
  Status fill(const std::vector<int64_t>& indices, Batch* b) const override {
    // Each sample walks the chain from a start token of its own; positions are generated
    // in order, so cache the walk of the current sample.
    int64_t cached = -1;
    std::vector<int32_t> walk(static_cast<size_t>(seq_len_ + 1));
    fill_windows(indices, seq_len_, b, [&](int64_t index, int t) {
      if (index != cached) {
        const uint64_t stream = hash(seed_, static_cast<uint64_t>(split_) + 11, static_cast<uint64_t>(index));
        walk[0] = static_cast<int32_t>(stream % static_cast<uint64_t>(vocab_));
        for (int k = 1; k <= seq_len_; ++k) walk[static_cast<size_t>(k)] = markov_next(walk[k - 1], vocab_, seed_, hash(stream, k));
        cached = index;
      }
      return walk[static_cast<size_t>(t)];
    });
    return Status::Ok();
  }

 private:
  int vocab_, seq_len_;
  uint64_t seed_;
  Split split_;
  int64_t size_;
};

class TokenFileSource : public DataSource {
 public:
  TokenFileSource(TokenShards shards, std::string path, const char* key, int vocab, int seq_len)
      : shards_(std::move(shards)), path_(std::move(path)), key_(key), vocab_(vocab), seq_len_(seq_len) {}
  int64_t size() const override { return shards_.samples(); }
  int64_t held_out_sample(int64_t i, int64_t count) const override {
    // floor(i x size / count): evenly spaced, the first sample always among them.
    return static_cast<int64_t>(static_cast<__int128>(i) * size() / std::max<int64_t>(count, 1));
  }
  std::string describe() const override {
    const std::string files =
        shards_.shard_count() == 1 ? "" : std::to_string(shards_.shard_count()) + " files, ";
    return "tokens " + path_ + " (" + files + std::to_string(shards_.tokens()) + " tokens, " +
           std::to_string(size()) + " samples of " + std::to_string(seq_len_) + ")";
  }
  std::string fingerprint() const override { return shards_.fingerprint(); }
  Status check_unchanged() const override { return shards_.check_unchanged(); }
  int64_t file_count() const override { return static_cast<int64_t>(shards_.shard_count()); }
  Status fill(const std::vector<int64_t>& indices, Batch* b) const override {
    const TokenFile* bad_file = nullptr;
    int64_t bad_at = -1, bad_sample = -1;
    int64_t cached = -1;
    TokenShards::Where where{0, 0};
    fill_windows(indices, seq_len_, b, [&](int64_t index, int t) {
      if (index != cached) where = shards_.locate(index), cached = index;
      const TokenFile& file = shards_.shard(where.shard);
      const int64_t at = where.offset + t;
      const int32_t token = file.tokens()[at];
      if (token >= vocab_ && bad_at < 0) bad_file = &file, bad_at = at, bad_sample = index;
      return token;
    });
    if (bad_at >= 0) {
      return Status(StatusCode::kInvalidArgument, "token file '" + bad_file->path() + "': token " +
                                                      std::to_string(bad_file->tokens()[bad_at]) + " at position " +
                                                      std::to_string(bad_at) + " is outside model.vocab_size (" +
                                                      std::to_string(vocab_) + "), in sample " +
                                                      std::to_string(bad_sample) + " of " + key_ + " ('" + path_ +
                                                      "'; dp-data info FILE prints a file's largest token)");
    }
    return Status::Ok();
  }

 private:
  TokenShards shards_;
  std::string path_;  // as the config gives it: a file or a pattern
  const char* key_;   // "data.path" or "data.val_path"
  int vocab_, seq_len_;
};

}  // namespace

const char* to_string(Split split) { return split == Split::kTrain ? "train" : "val"; }

StatusOr<std::unique_ptr<DataSource>> make_source(const Config& c, Split split) {
  if (c.model.kind == ModelKind::kMlp) {
    if (c.data.kind != DataKind::kSynthetic) {
      return Status(StatusCode::kInvalidArgument, c.where("data.kind") + ": the mlp model trains on synthetic data only");
    }
    try {
      return std::unique_ptr<DataSource>(new SyntheticFeatures(c, split));
    } catch (const std::bad_alloc&) {
      const double gib = static_cast<double>(c.model.vocab_size) * 32 * 4 / double(1 << 30);
      char text[64];
      std::snprintf(text, sizeof(text), "%.1f GiB", gib);
      return Status(StatusCode::kOutOfMemory, c.where("model.vocab_size") + ": model.vocab_size = " +
                                                  std::to_string(c.model.vocab_size) + ": the mlp's synthetic "
                                                  "teacher of that many classes needs " + text +
                                                  " of host memory, which this process could not allocate");
    }
  }
  if (c.data.kind == DataKind::kSynthetic) return std::unique_ptr<DataSource>(new SyntheticTokens(c, split));
  const std::string& path = split == Split::kTrain ? c.data.path : c.data.val_path;
  if (path.empty()) return std::unique_ptr<DataSource>();
  if (split == Split::kVal) {
    ZDP_RETURN_IF_ERROR(
        check_disjoint_splits(c.data.path, path).with_context(c.where("data.val_path") + ": data.val_path"));
  }
  StatusOr<TokenShards> shards = TokenShards::open(path, c.model.seq_len);
  if (!shards.ok()) return shards.status().with_context(c.where(split == Split::kTrain ? "data.path" : "data.val_path"));
  const char* key = split == Split::kTrain ? "data.path" : "data.val_path";
  return std::unique_ptr<DataSource>(new TokenFileSource(std::move(*shards), path, key, c.model.vocab_size, c.model.seq_len));
}

Status check_held_out_samples(const DataSource& source, int64_t count) {
  constexpr int64_t kChunk = 256;
  const int64_t total = std::min(count, source.size());
  Batch batch;
  std::vector<int64_t> indices;
  for (int64_t first = 0; first < total; first += kChunk) {
    indices.clear();
    for (int64_t i = first; i < std::min(total, first + kChunk); ++i) indices.push_back(source.held_out_sample(i, total));
    ZDP_RETURN_IF_ERROR(source.fill(indices, &batch));
  }
  return Status::Ok();
}

std::vector<uint16_t> byte_tokens(const std::string& text) {
  std::vector<uint16_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::vector<uint16_t> markov_tokens(int64_t count, int vocab, uint64_t seed) {
  std::vector<uint16_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)));
  int32_t token = static_cast<int32_t>(hash(seed, 0x5eed) % static_cast<uint64_t>(vocab));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint16_t>(token);
    token = markov_next(token, vocab, seed, hash(seed, 0xd1ce, i));
  }
  return out;
}

}  // namespace zdp::trainer
