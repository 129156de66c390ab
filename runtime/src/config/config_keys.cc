// The config key table: every key of every section, its type, range, default (read from
// the default-constructed structs of zdp/config.h) and --help line, in one place.
#include "runtime/src/config/config_keys.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "runtime/internal/config_limits.h"

namespace zdp {
namespace config_internal {
namespace {

template <typename E>
struct EnumWord {
  const char* word;
  E value;
};

constexpr EnumWord<Backend> kBackendWords[] = {
    {"auto", Backend::kAuto}, {"nccl", Backend::kNccl}, {"gloo", Backend::kGloo}};
constexpr EnumWord<ModelKind> kModelKindWords[] = {{"mlp", ModelKind::kMlp}, {"gpt", ModelKind::kGpt}};
constexpr EnumWord<DataKind> kDataKindWords[] = {
    {"synthetic", DataKind::kSynthetic}, {"tokens", DataKind::kTokens}};
constexpr EnumWord<MlpTask> kMlpTaskWords[] = {
    {"classification", MlpTask::kClassification}, {"regression", MlpTask::kRegression}};
constexpr EnumWord<AttentionImpl> kAttentionWords[] = {
    {"auto", AttentionImpl::kAuto}, {"fused", AttentionImpl::kFused}, {"batched", AttentionImpl::kBatched}};
// kPath has no word: any other string is the path.
constexpr EnumWord<ResumeMode> kResumeWords[] = {{"auto", ResumeMode::kAuto}, {"never", ResumeMode::kNever}};
constexpr EnumWord<CheckpointStorage> kStorageWords[] = {
    {"shared", CheckpointStorage::kShared}, {"per-node", CheckpointStorage::kPerNode}};
constexpr EnumWord<GradAccumulation> kAccumulateWords[] = {
    {"local", GradAccumulation::kLocal}, {"sharded", GradAccumulation::kSharded}};
// Not every DType is a sensible choice for every key, hence two lists.
constexpr EnumWord<DType> kComputeDTypeWords[] = {
    {"fp32", DType::kF32}, {"bf16", DType::kBF16}, {"fp16", DType::kF16}};
constexpr EnumWord<DType> kReduceDTypeWords[] = {{"fp32", DType::kF32}, {"bf16", DType::kBF16}};
constexpr EnumWord<WireQuant> kReduceQuantWords[] = {{"int8", WireQuant::kInt8}, {"int4", WireQuant::kInt4}};
constexpr EnumWord<WireQuant> kGatherWords[] = {{"auto", WireQuant::kNone}, {"int8", WireQuant::kInt8}};
constexpr EnumWord<CompressScope> kCompressWords[] = {{"all", CompressScope::kAll},
                                                     {"inter-node", CompressScope::kInterNode}};
constexpr EnumWord<WireQuant> kWireQuantWords[] = {
    {"none", WireQuant::kNone}, {"int8", WireQuant::kInt8}, {"int4", WireQuant::kInt4}};

template <typename E, size_t N>
const char* word_of(const EnumWord<E> (&words)[N], E value) {
  for (const auto& w : words) {
    if (w.value == value) return w.word;
  }
  return "?";
}

Range at_least(double lo) { return Range{lo, Range{}.hi, false, false}; }
Range between(double lo, double hi) { return Range{lo, hi, false, false}; }
Range unit_interval() { return Range{0.0, 1.0, false, true}; }  // [0, 1)
Range off_or_between(double lo, double hi) { return Range{lo, hi, false, false, true}; }  // 0, or [lo, hi]

// Struct field <-> Value. Integers travel as int64 (the range keeps them in the field's type).
template <typename T>
Value to_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return Value(std::in_place_type<bool>, v);
  } else if constexpr (std::is_integral_v<T>) {
    return Value(std::in_place_type<int64_t>, static_cast<int64_t>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return Value(std::in_place_type<double>, static_cast<double>(v));
  } else {
    return Value(std::in_place_type<T>, v);
  }
}

template <typename T>
void from_value(const Value& v, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    *out = std::get<bool>(v);
  } else if constexpr (std::is_integral_v<T>) {
    *out = static_cast<T>(std::get<int64_t>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    *out = static_cast<T>(std::get<double>(v));
  } else {
    *out = std::get<T>(v);
  }
}

template <typename T>
constexpr KeyType type_of() {
  if constexpr (std::is_same_v<T, bool>) return KeyType::kBool;
  else if constexpr (std::is_integral_v<T>) return KeyType::kInt;
  else if constexpr (std::is_floating_point_v<T>) return KeyType::kFloat;
  else if constexpr (std::is_same_v<T, std::string>) return KeyType::kString;
  else if constexpr (std::is_same_v<T, StringList>) return KeyType::kStringList;
  else return KeyType::kStringMap;
}

KeyInfo named(const char* name, KeyType type, const char* doc) {
  KeyInfo k;
  k.name = name;
  const size_t dot = k.name.find('.');
  k.section = k.name.substr(0, dot);
  k.key = k.name.substr(dot + 1);
  k.type = type;
  k.doc = doc;
  return k;
}

// A plain field; the type follows the member, integer ranges are clipped to its limits.
template <typename S, typename T>
KeyInfo field(const char* name, S Config::*section, T S::*member, const char* doc, Range range = {}) {
  KeyInfo k = named(name, type_of<T>(), doc);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    range.lo = std::max(range.lo, static_cast<double>(std::numeric_limits<T>::min()));
    range.hi = std::min(range.hi, static_cast<double>(std::numeric_limits<T>::max()));
  }
  k.range = range;
  k.get = [section, member](const Config& c) { return to_value(c.*section.*member); };
  k.set = [section, member](Config& c, const Value& v) { from_value(v, &(c.*section.*member)); };
  return k;
}

KeyInfo non_empty(KeyInfo k) {
  k.non_empty = true;
  return k;
}

// An integer >= 1, or "auto": the Value is the string "auto", the field holds 0.
template <typename S>
KeyInfo auto_int_field(const char* name, S Config::*section, int S::*member, const char* doc, Range range) {
  KeyInfo k = field(name, section, member, doc, range);
  k.type = KeyType::kIntOrAuto;
  k.get = [section, member](const Config& c) {
    const int v = c.*section.*member;
    return v == 0 ? Value(std::string("auto")) : Value(std::in_place_type<int64_t>, v);
  };
  k.set = [section, member](Config& c, const Value& v) {
    c.*section.*member = std::holds_alternative<std::string>(v) ? 0 : static_cast<int>(std::get<int64_t>(v));
  };
  return k;
}

template <typename S, typename E>
KeyInfo enum_field(const char* name, S Config::*section, E S::*member, std::vector<EnumWord<E>> words,
                   const char* doc) {
  KeyInfo k = named(name, KeyType::kEnum, doc);
  for (const auto& w : words) k.words.emplace_back(w.word);
  k.get = [section, member, words](const Config& c) {
    for (const auto& w : words) {
      if (w.value == c.*section.*member) return Value(std::string(w.word));
    }
    // A value set in code that no word names (a DType the key does not allow): its own
    // name, which check_value then refuses naming it.
    return Value(std::string(to_string(c.*section.*member)));
  };
  k.set = [section, member, words](Config& c, const Value& v) {
    for (const auto& w : words) {
      if (std::get<std::string>(v) == w.word) c.*section.*member = w.value;
    }
  };
  return k;
}
template <typename S, typename E, size_t N>
KeyInfo enum_field(const char* name, S Config::*section, E S::*member, const EnumWord<E> (&words)[N],
                   const char* doc) {
  return enum_field(name, section, member, std::vector<EnumWord<E>>(std::begin(words), std::end(words)), doc);
}

// The words of an enum that another library owns, from its to_string(): the [optim]
// enums (zdp/optim_config.h) have their words there, once.
template <typename E>
std::vector<EnumWord<E>> words_of(std::initializer_list<E> values) {
  std::vector<EnumWord<E>> out;
  for (E v : values) out.push_back({to_string(v), v});
  return out;
}

// zero.reduce_dtype: a dtype (kReduceDTypeWords), or a quantized format (kReduceQuantWords:
// reduce_quant, with reduce_dtype fp32, the dtype the received chunks are summed in).
KeyInfo reduce_dtype_field(const char* name, const char* doc) {
  KeyInfo k = named(name, KeyType::kEnum, doc);
  for (const auto& w : kReduceDTypeWords) k.words.emplace_back(w.word);
  for (const auto& w : kReduceQuantWords) k.words.emplace_back(w.word);
  k.get = [](const Config& c) {
    if (c.zero.reduce_quant != WireQuant::kNone) return Value(std::string(word_of(kReduceQuantWords, c.zero.reduce_quant)));
    for (const auto& w : kReduceDTypeWords) {
      if (w.value == c.zero.reduce_dtype) return Value(std::string(w.word));
    }
    return Value(std::string(to_string(c.zero.reduce_dtype)));
  };
  k.set = [](Config& c, const Value& v) {
    const std::string& word = std::get<std::string>(v);
    c.zero.reduce_quant = WireQuant::kNone;
    for (const auto& w : kReduceDTypeWords) {
      if (word == w.word) c.zero.reduce_dtype = w.value;
    }
    for (const auto& w : kReduceQuantWords) {
      if (word == w.word) {
        c.zero.reduce_quant = w.value;
        c.zero.reduce_dtype = DType::kF32;
      }
    }
  };
  return k;
}

// checkpoint.resume: a word of kResumeWords, or any other non-empty string, which is a path
// (ResumeMode::kPath, the string in resume_path).
KeyInfo resume_field(const char* name, const char* doc) {
  KeyInfo k = named(name, KeyType::kString, doc);
  k.non_empty = true;
  k.get = [](const Config& c) {
    return Value(c.checkpoint.resume == ResumeMode::kPath ? c.checkpoint.resume_path
                                                           : std::string(word_of(kResumeWords, c.checkpoint.resume)));
  };
  k.set = [](Config& c, const Value& v) {
    const std::string& text = std::get<std::string>(v);
    c.checkpoint.resume = ResumeMode::kPath;
    c.checkpoint.resume_path = text;
    for (const auto& w : kResumeWords) {
      if (text == w.word) {
        c.checkpoint.resume = w.value;
        c.checkpoint.resume_path.clear();
      }
    }
  };
  return k;
}

std::vector<KeyInfo> build_table() {
  static_assert(kCpuDefaultNprocPerNode == 2, "update the doc of launch.nproc_per_node");
  using C = Config;
  using L = LaunchConfig;
  using M = ModelConfig;
  using D = DataConfig;
  using T = TrainConfig;
  using O = OptimConfig;
  using Z = ZeroConfig;
  using K = CheckpointConfig;
  using P = ProfileConfig;
  return {
      auto_int_field("launch.nproc_per_node", &C::launch, &L::nproc_per_node,
                     "rank processes on this node; \"auto\": the CUDA device count, or 2 without CUDA devices",
                     between(1, static_cast<double>(kMaxRanksPerNode))),
      field("launch.nnodes", &C::launch, &L::nnodes, "nodes in the job, each running one dp-launch",
            between(1, static_cast<double>(kMaxWorldSize))),
      field("launch.node_rank", &C::launch, &L::node_rank,
            "this node's index, 0 <= node_rank < nnodes; node 0 hosts the store; --node-rank beats it, and under "
            "Slurm it must agree with SLURM_NODEID", at_least(0)),
      non_empty(field("launch.master_addr", &C::launch, &L::master_addr,
                      "address of node 0, where the rendezvous store listens")),
      field("launch.master_port", &C::launch, &L::master_port,
            "TCP port of the rendezvous store on node 0", between(1, 65535)),
      field("launch.socket_ifname", &C::launch, &L::socket_ifname,
            "network interface whose address the ranks advertise to their Gloo peers (also NCCL_SOCKET_IFNAME); "
            "\"\" = $GLOO_SOCKET_IFNAME, else the interface that routes to master_addr"),
      field("launch.rank_addr", &C::launch, &L::rank_addr,
            "address of this node that its ranks advertise to their Gloo peers (set per node with --set); "
            "beats socket_ifname; \"\" = see socket_ifname"),
      enum_field("launch.backend", &C::launch, &L::backend, kBackendWords,
                 "collectives: nccl (GPU), gloo (CPU); auto = nccl when ranks use CUDA devices, else gloo"),
      field("launch.program", &C::launch, &L::program,
            "rank executable; empty = dp-train installed beside dp-launch"),
      field("launch.args", &C::launch, &L::args, "extra arguments of every rank (none for dp-train: its settings are keys)"),
      field("launch.env", &C::launch, &L::env, "extra environment variables of every rank"),
      non_empty(field("launch.log_dir", &C::launch, &L::log_dir, "directory of the per-rank logs")),
      field("launch.max_restarts", &C::launch, &L::max_restarts,
            "whole-job restarts after a rank fails; 0 = fail at once", between(0, kMaxRestarts)),
      field("launch.collective_timeout_s", &C::launch, &L::collective_timeout_s,
            "a collective waiting longer than this fails the job", between(kMinTimeoutS, kMaxTimeoutS)),
      field("launch.startup_timeout_s", &C::launch, &L::startup_timeout_s,
            "every rank must join the job (zdp::init done) within this, or the job stops; 0 = no deadline from "
            "dp-launch (programs without zdp::init; a rank's store wait: max(collective_timeout_s, 10 s))", off_or_between(kMinTimeoutS, kMaxTimeoutS)),
      field("launch.heartbeat_timeout_s", &C::launch, &L::heartbeat_timeout_s,
            "a rank whose heartbeat stops this long is named and the job stopped; 0 = no liveness watch "
            "(ranks beat every tenth of it, within [50 ms, 1 s]: below 1 s healthy ranks would be blamed)",
            off_or_between(1, 3600)),

      enum_field("model.kind", &C::model, &M::kind, kModelKindWords, "reference model of dp-train"),
      field("model.n_layers", &C::model, &M::n_layers,
            "blocks (layer groups: stage 3 gathers one at a time)", between(1, kMaxLayers)),
      field("model.d_model", &C::model, &M::d_model, "hidden width", between(1, kMaxWidth)),
      field("model.n_heads", &C::model, &M::n_heads, "attention heads (gpt); must divide d_model", between(1, kMaxHeads)),
      field("model.vocab_size", &C::model, &M::vocab_size, "token vocabulary (gpt) or classes (mlp)",
            between(1, kMaxVocab)),
      field("model.seq_len", &C::model, &M::seq_len, "tokens per sample (gpt)", between(1, kMaxSeqLen)),
      enum_field("model.dtype", &C::model, &M::dtype, kComputeDTypeWords,
                 "compute dtype of parameters; fp32 masters are always kept"),
      field("model.init_std", &C::model, &M::init_std,
            "gpt: std of the normal initialisation of weights, attn.proj and mlp.proj at init_std/sqrt(2 n_layers) "
            "(the mlp uses 1/sqrt(d_model) and refuses another value)",  // 1e9 overflowed LayerNorm's
            Range{0, 100, true, false}),  // fp32 variance (init_std^2 x d): the loss read ln V, silently
      enum_field("model.task", &C::model, &M::task, kMlpTaskWords,
                 "mlp: classify into vocab_size classes, or regress vocab_size outputs"),
      enum_field("model.attention", &C::model, &M::attention, kAttentionWords,
                 "gpt on GPUs: fused (cuDNN flash attention; bf16/fp16, a build with cuDNN), batched "
                 "(strided-batched GEMMs, seq x seq probabilities kept), auto (fused where it applies)"),

      enum_field("data.kind", &C::data, &D::kind, kDataKindWords,
                 "synthetic: seeded random samples; tokens: a token file"),
      field("data.path", &C::data, &D::path,
            "token file, or shards by a glob (\"data/fineweb_train_*.bin\"); required when kind = \"tokens\""),
      field("data.shuffle", &C::data, &D::shuffle, "per-epoch seeded shuffle of the sample order"),
      field("data.val_path", &C::data, &D::val_path,
            "held-out token file or glob (kind = \"tokens\", e.g. dp-data's val.bin); empty = no evaluation"),
      field("data.synthetic_samples", &C::data, &D::synthetic_samples,
            "samples in one epoch of the synthetic training split", between(1, kMaxSyntheticSamples)),

      field("train.global_batch", &C::train, &T::global_batch,
            "samples per optimizer step over all ranks = micro_batch x accum_steps x world size",
            between(1, kMaxGlobalBatch)),
      field("train.micro_batch", &C::train, &T::micro_batch, "samples per forward/backward on one rank", at_least(1)),
      field("train.accum_steps", &C::train, &T::accum_steps,
            "micro-batches per step on one rank; 0 = global_batch / (micro_batch x world size)", at_least(0)),
      field("train.steps", &C::train, &T::steps, "training steps to run (an fp16 step skipped on an overflow counts too)", at_least(1)),
      field("train.seed", &C::train, &T::seed, "seeds parameters and data order (same on every rank)", at_least(0)),
      field("train.deterministic", &C::train, &T::deterministic, "parameters, optimizer state and losses bit-identical at any world size dividing the step's micro-batches, any "
            "zero stage, bucket size, overlap and accumulation mode (same device kind); dp-train prints a parameter "
            "SHA-256 at the end; costs world size x the reduce-scatter's bytes, and OpenBLAS runs on one thread"),
      field("train.log_every", &C::train, &T::log_every, "steps between loss/throughput log lines", at_least(1)),
      field("train.eval_every", &C::train, &T::eval_every,
            "steps between held-out evaluations; 0 = only after the last step", at_least(0)),
      field("train.eval_samples", &C::train, &T::eval_samples, "held-out samples per evaluation, over all ranks: the same ones each time, spread over a token file (synthetic data holds out 4096)", at_least(1)),

      enum_field("optim.name", &C::optim, &O::name, words_of({OptimizerKind::kAdamW, OptimizerKind::kSgd}), "optimizer"),
      field("optim.lr", &C::optim, &O::lr, "peak learning rate", Range{0, kMaxLr, true, false}),
      field("optim.beta1", &C::optim, &O::beta1, "AdamW first-moment decay (SGD: momentum)", unit_interval()),
      field("optim.dampening", &C::optim, &O::dampening, "SGD: the momentum takes (1 - dampening) x gradient", unit_interval()),
      field("optim.nesterov", &C::optim, &O::nesterov, "SGD: Nesterov momentum (needs beta1 > 0, dampening 0)"),
      field("optim.beta2", &C::optim, &O::beta2, "AdamW second-moment decay", unit_interval()),
      // In fp32's normal range: the optimizers compute in fp32, where 1e-50 was 0 (0 / 0) and 1e39 infinite.
      field("optim.eps", &C::optim, &O::eps, "AdamW denominator epsilon", Range{std::numeric_limits<float>::min(), std::numeric_limits<float>::max()}),
      field("optim.weight_decay", &C::optim, &O::weight_decay, "weight decay: decoupled for adamw, added to the gradient (L2) for sgd, as PyTorch; not for biases and norms (names *.bias, *norm*, *ln_*, *ln[0-9f]..., any case), the embeddings decayed as in nanoGPT", Range{0, std::numeric_limits<float>::max()}),
      field("optim.grad_clip", &C::optim, &O::grad_clip, "max global gradient norm; 0 = no clipping", at_least(0)),
      enum_field("optim.schedule", &C::optim, &O::schedule,
                 words_of({LrSchedule::kConstant, LrSchedule::kCosine, LrSchedule::kLinear}),
                 "learning-rate decay after warmup"),
      field("optim.warmup_steps", &C::optim, &O::warmup_steps,
            "linear warmup steps from 0 to lr; at most train.steps, less with a decaying schedule", at_least(0)),
      field("optim.min_lr", &C::optim, &O::min_lr,
            "learning rate at the end of cosine/linear decay; at most lr", at_least(0)),
      enum_field("optim.lr_scaling", &C::optim, &O::lr_scaling,
                 words_of({LrScalingRule::kNone, LrScalingRule::kLinear, LrScalingRule::kSqrt}),
                 "lr and min_lr follow the global batch B: linear x B/base_batch, sqrt x sqrt(B/base_batch)"),
      field("optim.base_batch", &C::optim, &O::base_batch,
            "global batch lr was tuned at; 0 = train.global_batch (no scaling)", at_least(0)),
      enum_field("optim.rounding", &C::optim, &O::rounding,
                 words_of({ParamRounding::kNearest, ParamRounding::kStochastic}),
                 "how updated weights are rounded into bf16/fp16 parameters: nearest (even), or stochastic "
                 "(unbiased, keyed by seed, step and element; needs model.dtype bf16 or fp16)"),

      field("zero.stage", &C::zero, &Z::stage,
            "0 = DDP, 1 = shard optimizer state, 2 = + gradients, 3 = + parameters", between(0, 3)),
      field("zero.bucket_mb", &C::zero, &Z::bucket_mb,
            "target bucket size in MiB (unit of reduce-scatter / all-gather)", Range{0, 65536, true, false}),
      reduce_dtype_field("zero.reduce_dtype",
                         "dtype gradients are reduced in; int8 / int4: block-quantized exchange (stages 1-3), "
                         "summed in fp32"),
      field("zero.error_feedback", &C::zero, &Z::error_feedback,
            "reduce_dtype int8/int4: carry each rank's quantization error into the next step (+4 bytes x "
            "parameters per rank)"),
      enum_field("zero.gather_dtype", &C::zero, &Z::gather_quant, kGatherWords,
                 "parameter all-gather on the wire: auto = the compute dtype; int8 = block-quantized (stages 1-3)"),
      enum_field("zero.compress", &C::zero, &Z::compress, kCompressWords,
                 "peers the int8/int4 reduce_dtype and gather_dtype apply to: all, or inter-node (peers on other "
                 "nodes; same-node peers get full precision)"),
      field("zero.overlap", &C::zero, &Z::overlap, "reduce buckets in backward on the comm stream; false: at step() (stages 2-3 stage every gradient group until then)"),
      field("zero.prefetch_layers", &C::zero, &Z::prefetch_layers,
            "stage 3: layer groups gathered ahead of use (at most the model's other groups are)",
            between(0, kMaxLayers)),
      enum_field("zero.accumulate", &C::zero, &Z::accumulate, kAccumulateWords,
                 "micro-batches (accum_steps > 1): local = fp32 buffer of all gradients, reduced once; "
                 "sharded (stages 2-3) = reduce-scatter each into the fp32 gradient shard"),

      field("checkpoint.dir", &C::checkpoint, &K::dir,
            "where checkpoints (step-N/ and latest) are written and looked for; \"\" = no checkpoints"),
      field("checkpoint.every_steps", &C::checkpoint, &K::every_steps,
            "steps between checkpoints; 0 = only after the last step (checkpoint.dir set)", at_least(0)),
      field("checkpoint.keep_last", &C::checkpoint, &K::keep_last,
            "checkpoints kept in dir: the newest up to the step just saved (higher steps, another run's, "
            "are left alone); older ones are deleted",
            at_least(1)),
      resume_field("checkpoint.resume",
                   "\"auto\": continue from dir's latest checkpoint if there is one; \"never\"; or a path (a "
                   "step-N directory, or a checkpoint dir: its latest)"),
      enum_field("checkpoint.storage", &C::checkpoint, &K::storage, kStorageWords,
                 "shared: one filesystem seen by every node (each rank writes its slices); per-node: "
                 "node-local disks, every node keeps a full copy"),

      field("profile.enabled", &C::profile, &P::enabled,
            "record per-step time breakdown, collectives and memory on every rank; summary at the end"),
      field("profile.warmup_steps", &C::profile, &P::warmup_steps, "first steps left out of the summary",
            at_least(0)),
      field("profile.active_steps", &C::profile, &P::active_steps,
            "steps measured after the warm-up; 0 = all the remaining ones", at_least(0)),
      field("profile.trace", &C::profile, &P::trace, "write the Chrome / Perfetto trace <dir>/trace.json"),
      field("profile.dir", &C::profile, &P::dir,
            "where profile.jsonl, trace.json and memory.svg go; empty = launch.log_dir"),
      field("profile.peak_tflops", &C::profile, &P::peak_tflops,
            "per-rank peak TFLOP/s for MFU (step lines, profile summary); 0 = the datasheet's for GPUs known "
            "by their exact name (A100 SXM, H100 SXM, H200; bf16/fp16, or fp32), none elsewhere", between(0, 1e6)),
      field("profile.kernels", &C::profile, &P::kernels,
            "gpt: time each kernel region (a linear layer, a layernorm, attention...) on rank 0's compute stream "
            "and write <dir>/kernels.json, which `dp-launch plan --from-profile DIR` compares with its prediction"),
  };
}

}  // namespace

const std::vector<KeyInfo>& key_table() {
  static const std::vector<KeyInfo> table = build_table();
  return table;
}

const std::vector<std::string>& section_names() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> out;
    for (const KeyInfo& k : key_table()) {
      if (out.empty() || out.back() != k.section) out.push_back(k.section);
    }
    return out;
  }();
  return sections;
}

const KeyInfo* find_key(const std::string& name) {
  for (const KeyInfo& k : key_table()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace config_internal

const char* to_string(Backend value) { return config_internal::word_of(config_internal::kBackendWords, value); }
const char* to_string(ModelKind value) { return config_internal::word_of(config_internal::kModelKindWords, value); }
const char* to_string(DataKind value) { return config_internal::word_of(config_internal::kDataKindWords, value); }
const char* to_string(ResumeMode value) {
  return value == ResumeMode::kPath ? "path" : config_internal::word_of(config_internal::kResumeWords, value);
}
const char* to_string(MlpTask value) { return config_internal::word_of(config_internal::kMlpTaskWords, value); }
const char* to_string(AttentionImpl value) { return config_internal::word_of(config_internal::kAttentionWords, value); }
const char* to_string(WireQuant value) { return config_internal::word_of(config_internal::kWireQuantWords, value); }
const char* to_string(CompressScope value) { return config_internal::word_of(config_internal::kCompressWords, value); }
int wire_bits(WireQuant value) { return value == WireQuant::kInt8 ? 8 : (value == WireQuant::kInt4 ? 4 : 0); }
const char* to_string(GradAccumulation value) {
  return config_internal::word_of(config_internal::kAccumulateWords, value);
}

}  // namespace zdp
