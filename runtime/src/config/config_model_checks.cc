// The model's keys against each other and against what the models can run: refused at
// load and at --dry-run, with the keys named, instead of in every rank once it started.
#include <string>

#include "kernels/exact_sumsq.h"
#include "runtime/internal/config_limits.h"
#include "runtime/src/config/config_keys.h"
#include "runtime/src/config/cross_checker.h"

namespace zdp::config_internal {
namespace {

// The model's size (runtime/internal/config_limits.h), estimated in double before any int64 product of its
// keys is taken. Estimates, not plans: what the models declare and keep (trainer/models/)
// is a little less.
void model_size_checks(const Config& c, CrossChecker& check) {
  const ModelConfig& m = c.model;
  const double L = m.n_layers, C = m.d_model, V = m.vocab_size, T = m.seq_len, H = m.n_heads;
  const double B = static_cast<double>(c.train.micro_batch);
  const bool gpt = m.kind == ModelKind::kGpt;
  // gpt: embeddings and 12 d^2 per block; activations per token: 16 d per block, the
  // attention probabilities (H x T, kept on the batched path) and the logits. mlp: L
  // d x d layers and the head; per sample a few d per layer and the outputs.
  const double params = gpt ? (V + T) * C + 12.0 * L * C * C : L * C * C + C * V;
  const double activations = gpt ? B * T * (L * (16.0 * C + H * T) + V) : B * (4.0 * L * C + 4.0 * (C + V));
  check.require(params <= kMaxParams, {"model.n_layers", "model.d_model", "model.vocab_size", "model.seq_len"}, [&] {
    return "the model (" + std::string(to_string(m.kind)) + ", model.n_layers " + str(m.n_layers) + ", model.d_model " +
           str(m.d_model) + ", model.vocab_size " + str(m.vocab_size) + (gpt ? ", model.seq_len " + str(m.seq_len) : "") +
           ") has about " + approx(params) + " parameters, more than zdp plans for (2^48 = " +
           approx(kMaxParams) + ")";
  });
  // The exact gradient norm of deterministic mode sums at most 2^32 squares (its integers'
  // room, kernels/exact_sumsq.h); the engine refused a larger model only at finalize, in
  // every rank. The estimate is below the declared count (no biases, no norms), so a model
  // refused here would be refused there.
  check.require(!c.train.deterministic || params <= static_cast<double>(kernels::kExactMaxElements),
                {"train.deterministic", "model.n_layers", "model.d_model", "model.vocab_size"}, [&] {
                  return "train.deterministic: the model has about " + approx(params) +
                         " parameters, more than the exact gradient norm sums (2^32 = " +
                         str(kernels::kExactMaxElements) + " elements): use a smaller model or leave "
                         "train.deterministic out";
                });
  check.require(params > kMaxParams || activations <= kMaxActivations,
                {"train.micro_batch", "model.seq_len", "model.n_layers", "model.d_model", "model.n_heads",
                 "model.vocab_size"},
                [&] {
                  return "a micro-batch of " + str(c.train.micro_batch) + " keeps about " + approx(activations) +
                         " activation values for backward (model.n_layers " + str(m.n_layers) + ", model.d_model " +
                         str(m.d_model) + (gpt ? ", model.seq_len " + str(m.seq_len) : "") +
                         "), more than zdp plans for (2^50 = " + approx(kMaxActivations) + ")";
                });
}

}  // namespace

void model_checks(const Config& c, CrossChecker& check) {
  model_size_checks(c, check);
  // The mlp initialises with 1/sqrt(d_model) (unit-variance pre-activations at any width):
  // another init_std would be silently ignored, so it is refused.
  check.require(c.model.kind != ModelKind::kMlp || c.model.init_std == ModelConfig{}.init_std,
                {"model.init_std", "model.kind"}, [&] {
                  return "model.init_std (" + format_float(c.model.init_std) +
                         ") applies to model.kind = \"gpt\" only; the mlp initialises its weights with std "
                         "1/sqrt(d_model): leave model.init_std out";
                });
  // Stochastic rounding rounds into a 16-bit parameter; fp32 parameters are the masters.
  check.require(c.optim.rounding != ParamRounding::kStochastic || c.model.dtype != DType::kF32,
                {"optim.rounding", "model.dtype"}, [&] {
                  return std::string("optim.rounding = \"stochastic\" needs model.dtype \"bf16\" or \"fp16\" (it "
                                     "rounds the fp32 master weights into 16-bit parameters); model.dtype is \"") +
                         to_string(c.model.dtype) + "\"";
                });
  // cuDNN's fused attention has no fp32 engine, and the mlp has no attention to choose.
  check.require(c.model.attention != AttentionImpl::kFused || c.model.dtype != DType::kF32,
                {"model.attention", "model.dtype"}, [&] {
                  return std::string("model.attention = \"fused\" (cuDNN flash attention, on GPUs) needs model.dtype "
                                     "\"bf16\" or \"fp16\"; model.dtype is \"fp32\": use model.attention = "
                                     "\"batched\" or \"auto\"");
                });
  check.require(c.model.kind != ModelKind::kMlp || c.model.attention == AttentionImpl::kAuto,
                {"model.attention", "model.kind"}, [&] {
                  return std::string("model.attention (\"") + to_string(c.model.attention) +
                         "\") applies to model.kind = \"gpt\" only: the mlp has no attention; leave it out";
                });
  check.require(c.model.kind != ModelKind::kMlp || c.data.kind == DataKind::kSynthetic, {"data.kind", "model.kind"},
                [] { return std::string("model.kind = \"mlp\" trains on data.kind = \"synthetic\" only (tokens need \"gpt\")"); });
  check.require(c.data.kind != DataKind::kTokens || !c.data.path.empty(), {"data.path", "data.kind"},
                [] { return std::string("data.path must be set when data.kind = \"tokens\""); });
  // Synthetic data reads no file: a path with the default kind means the user expected
  // tokens and forgot data.kind. A kind set to "synthetic" on purpose (a config's
  // `--set data.kind=synthetic`, as the GPU check and the benchmarks do) knowingly leaves
  // the path unused: dp-train's "data" line says so.
  const bool kind_chosen = c.origins.count("data.kind") > 0;
  for (const char* key : {"data.path", "data.val_path"}) {
    const std::string& path = std::string(key) == "data.path" ? c.data.path : c.data.val_path;
    check.require(c.data.kind != DataKind::kSynthetic || kind_chosen || path.empty(), {key, "data.kind"}, [&] {
      return std::string(key) + " (\"" + path + "\") would be ignored: data.kind is \"synthetic\" by default; set " +
             "data.kind = \"tokens\" to train on it, or leave " + key + " out";
    });
  }
  // The gpt trains on next-token prediction: a task other than the default would be
  // silently ignored. (The default itself is written by to_toml into every resolved
  // config, so it is not refused: tests/fuzz/config_fuzz.cc's round trip found that.)
  check.require(c.model.kind != ModelKind::kGpt || c.model.task == ModelConfig{}.task, {"model.task", "model.kind"}, [&] {
    return std::string("model.task (\"") + to_string(c.model.task) +
           "\") applies to model.kind = \"mlp\" only; the gpt predicts the next token: leave model.task out";
  });
}

}  // namespace zdp::config_internal

namespace zdp {

Status check_model_support(const Config& config) {
  if (config.model.kind != ModelKind::kMlp || config.model.dtype == DType::kF32) return Status::Ok();
  // Refused before any rank builds its engine: the mlp refused 16-bit input only at its
  // first forward, naming no key.
  return Status(StatusCode::kInvalidArgument,
                config.where("model.dtype") + ": model.dtype = \"" + to_string(config.model.dtype) +
                    "\": dp-train's mlp (model.kind = \"mlp\", the default) computes in fp32 only (its synthetic "
                    "features are fp32); use model.dtype = \"fp32\", or model.kind = \"gpt\" for 16-bit training");
}

}  // namespace zdp
