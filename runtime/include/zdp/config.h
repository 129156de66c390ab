// The typed configuration of zdp: one struct per TOML section, defaults declared here,
// read from a TOML file with `--set section.key=value` overrides on top (precedence
// --set > file > defaults), every problem of one file reported together. One key table
// (runtime/src/config/config_keys.cc) drives parsing, range checks, to_toml, describe_resolved
// and key_reference. This header includes no TOML++ header: only config.cc parses TOML.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "zdp/checkpoint.h"  // CheckpointStorage
#include "zdp/comm.h"        // DType
#include "zdp/optim_config.h"  // [optim]: OptimConfig and its enums
#include "zdp/status.h"

namespace zdp {

// Collective backend of the ranks. kAuto: NCCL when the ranks use CUDA devices, else Gloo.
enum class Backend : int { kAuto = 0, kNccl, kGloo };
enum class ModelKind : int { kMlp = 0, kGpt };             // dp-train's reference models
enum class DataKind : int { kSynthetic = 0, kTokens };     // seeded random data | token file
enum class MlpTask : int { kClassification = 0, kRegression };  // what the mlp model's synthetic data asks
// How the gpt computes attention on a GPU. kFused: cuDNN's fused flash attention (bf16/fp16,
// a build with cuDNN; nothing seq x seq is kept); kBatched: strided-batched GEMMs around a
// causal softmax (the probabilities kept for backward; the CPU's only path); kAuto: fused
// where it applies (GPU, 16-bit, cuDNN accepts the shape), else batched.
enum class AttentionImpl : int { kAuto = 0, kFused, kBatched };
// kAuto: the newest checkpoint in checkpoint.dir, if any; kPath: CheckpointConfig::resume_path.
enum class ResumeMode : int { kAuto = 0, kNever, kPath };
// How stages 2-3 accumulate micro-batches (accum_steps > 1). kLocal: in a full-size fp32
// buffer, communicating on the last micro-batch only (DDP's no_sync; + 4 bytes x all
// parameters per rank). kSharded: every micro-batch is reduce-scattered and its slice added
// into the rank's fp32 gradient shard (DeepSpeed ZeRO-2/3; accum_steps x the gradient traffic).
enum class GradAccumulation : int { kLocal = 0, kSharded };
// Values on the wire of a compressed collective: full precision (the dtype of the data),
// or block-quantized (kernels/quantize.h: 256 values per fp32 scale) to 8 or 4 bits.
enum class WireQuant : int { kNone = 0, kInt8, kInt4 };
// Which peers a quantized reduce_dtype / gather_dtype applies to: every peer ("all"), or
// only peers on other nodes ("inter-node": same-node peers get full precision over the
// fast intra-node link; the node of each rank comes from the launcher, LaunchEnv::node_rank).
enum class CompressScope : int { kAll = 0, kInterNode };

// The config word of each value ("auto", "gpt", ...), as written in TOML.
const char* to_string(Backend value);
const char* to_string(ModelKind value);
const char* to_string(DataKind value);
const char* to_string(ResumeMode value);
const char* to_string(GradAccumulation value);
const char* to_string(MlpTask value);
const char* to_string(AttentionImpl value);  // "auto", "fused", "batched"
const char* to_string(WireQuant value);  // "none", "int8", "int4"
int wire_bits(WireQuant value);          // 8, 4; 0 for kNone
const char* to_string(CompressScope value);  // "all", "inter-node"

// nproc_per_node = "auto" on a machine without CUDA devices: enough ranks to exercise
// data parallelism anywhere, few enough not to oversubscribe a small machine.
inline constexpr int kCpuDefaultNprocPerNode = 2;

// [launch]: how dp-launch starts and supervises the ranks of this node.
struct LaunchConfig {
  int nproc_per_node = 0;              // rank processes on this node; 0 = "auto" (see resolve_nproc_per_node)
  int nnodes = 1;                      // nodes in the job, each running one dp-launch
  int node_rank = 0;                   // this node's index in [0, nnodes); node 0 hosts the store
  std::string master_addr = "127.0.0.1";  // address of node 0, where the rendezvous store listens
  int master_port = 29500;             // TCP port of the rendezvous store on node 0
  // The address each rank advertises to its Gloo peers: rank_addr if set (an address of
  // this node: set it per node with --set), else socket_ifname's address (also passed to
  // NCCL as NCCL_SOCKET_IFNAME), else $GLOO_SOCKET_IFNAME's, else the local address of the
  // interface that routes to master_addr (runtime/internal/rank_address.h: loopback only
  // when master_addr is written as loopback or the job is on one host).
  std::string socket_ifname;           // network interface, e.g. "eth1"; empty = see above
  std::string rank_addr;               // address or host name of this node; empty = see above
  Backend backend = Backend::kAuto;    // collective backend (see Backend)
  std::string program;                 // rank executable; empty = dp-train installed beside dp-launch
  std::vector<std::string> args;       // extra arguments passed to every rank; default none
  std::map<std::string, std::string> env;  // extra environment of every rank; default none
  std::string log_dir = "zdp-logs";    // per-rank logs land in <log_dir>/rank-<r>.log
  int max_restarts = 0;                // whole-job restarts after a rank failure; 0 = fail at once
  double collective_timeout_s = 300;   // a collective waiting longer fails the job
  double startup_timeout_s = 120;      // every rank must have joined the job (zdp::init done) within
                                       // this, or the job stops; 0 = no deadline (programs that
                                       // never use zdp::init)
  // Every rank publishes a heartbeat through the store (every timeout / 10, at most 1 s);
  // a rank whose heartbeat stops this long (stopped, frozen, swapped out) is named and the
  // job stopped, long before collective_timeout_s. A rank that is alive but slow is
  // reported and left running. 0 = no heartbeats.
  double heartbeat_timeout_s = 15;
};

// [model]: dp-train's reference model.
struct ModelConfig {
  ModelKind kind = ModelKind::kMlp;    // "mlp" | "gpt"
  int n_layers = 2;                    // blocks (layer groups; stage 3 gathers one at a time)
  int d_model = 64;                    // hidden width
  int n_heads = 4;                     // attention heads (gpt); must divide d_model
  int vocab_size = 256;                // token vocabulary (gpt) / classes (mlp)
  int seq_len = 64;                    // tokens per sample (gpt)
  DType dtype = DType::kF32;           // compute dtype: "fp32" | "bf16" | "fp16"; masters stay fp32
  double init_std = 0.02;              // gpt: std of the normal initialisation of weights (the mlp
                                       // uses 1/sqrt(d_model) and refuses another value)
  MlpTask task = MlpTask::kClassification;  // mlp: "classification" (vocab_size classes) | "regression" (vocab_size outputs)
  AttentionImpl attention = AttentionImpl::kAuto;  // gpt: "auto" | "fused" (cuDNN; bf16/fp16 on GPUs) | "batched"
};

// [data]: what the ranks train on.
struct DataConfig {
  DataKind kind = DataKind::kSynthetic;  // "synthetic" | "tokens"
  std::string path;                    // token file; required when kind = "tokens"
  bool shuffle = true;                 // per-epoch seeded shuffle (DistributedSampler semantics)
  std::string val_path;                // held-out token file (kind = "tokens"); empty = no evaluation
  int64_t synthetic_samples = 65536;   // samples in one epoch of the synthetic training split
};

// [train]: batch geometry and the step loop. global_batch = micro_batch x accum_steps x world.
struct TrainConfig {
  int64_t global_batch = 8;            // samples per optimizer step over all ranks
  int64_t micro_batch = 1;             // samples per forward/backward on one rank
  int64_t accum_steps = 0;             // micro-batches per step on one rank; 0 = derived from the world size
  int64_t steps = 100;                 // optimizer steps to run
  int64_t seed = 1234;                 // seeds parameters and data order (same on every rank)
  bool deterministic = false;          // bit-identical results at any world size dividing
                                       // global_batch / micro_batch and any zero stage
                                       // (docs/design.md "Deterministic mode")
  int log_every = 10;                  // steps between loss/throughput log lines
  int64_t eval_every = 0;              // steps between held-out evaluations; 0 = only after the last step
  int64_t eval_samples = 64;           // held-out samples per evaluation, over all ranks
};

// [zero]: the ZeRO stage and its buckets.
struct ZeroConfig {
  int stage = 2;                       // 0 = DDP, 1 = + optimizer state, 2 = + grads, 3 = + params sharded
  double bucket_mb = 25;               // target bucket size: MiB of compute-dtype elements (the
                                       // reduce-scatter / all-gather unit)
  DType reduce_dtype = DType::kF32;    // gradient reduction dtype: "fp32" | "bf16"; accumulation is fp32
  // Set by reduce_dtype = "int8" | "int4" (reduce_dtype then reads kF32: what the ranks
  // receive is summed in fp32): stages 1-3 exchange the gradient block-quantized
  // (all-to-all, each value quantized once) and sum it in fp32 on the receiver.
  WireQuant reduce_quant = WireQuant::kNone;
  // With reduce_quant: keep each rank's quantization error (one fp32 buffer of the whole
  // model per rank) and add it to the next step's gradient, so no error accumulates.
  bool error_feedback = true;
  // "auto" (the compute dtype) | "int8": the parameters' all-gather (stages 1-2 after the
  // update, stage 3 before use) sends block-quantized values; the fp32 masters are never
  // quantized, every rank (the owner too) uses the dequantized parameters.
  WireQuant gather_quant = WireQuant::kNone;
  // "all" | "inter-node": which peers the quantized reduce / gather formats apply to.
  CompressScope compress = CompressScope::kAll;
  bool overlap = true;                 // reduce each bucket during backward, as soon as its last
                                       // gradient is ready; false: every reduction waits for step()
  int prefetch_layers = 1;             // stage 3: layer groups gathered ahead of use
  GradAccumulation accumulate = GradAccumulation::kLocal;  // "local" | "sharded" (stages 2-3 only)

  // What the stage shards across the ranks (ZeRO): from stage 1 the optimizer state
  // (fp32 masters and moments), from stage 2 also the gradients, at stage 3 also the
  // parameters.
  bool shards_optimizer() const { return stage >= 1; }
  bool shards_grads() const { return stage >= 2; }
  bool shards_params() const { return stage >= 3; }
};

// [checkpoint]: topology-neutral checkpoints (full tensors by name, any world size and
// stage can load them): dir/step-N/{model,optimizer}.safetensors + state.json.
struct CheckpointConfig {
  std::string dir;                     // where checkpoints are written and looked for; "" = no checkpoints
  int64_t every_steps = 0;             // steps between checkpoints; 0 = only after the last step
  int keep_last = 2;                   // checkpoints kept in dir, the newest up to the step just
                                       // saved; older ones are deleted (higher steps, another
                                       // run's, are left alone)
  ResumeMode resume = ResumeMode::kAuto;  // TOML: "auto" | "never" | a checkpoint path (resume_path)
  std::string resume_path;             // kPath: a step-N directory, or a checkpoint dir (its latest)
  CheckpointStorage storage = CheckpointStorage::kShared;  // "shared" filesystem | "per-node" local disks
};

// [profile]: memory/throughput profiling runs (zdp/profiler.h). Rank 0 writes
// <dir>/profile.jsonl, trace.json and memory.svg and prints the summary after the run.
struct ProfileConfig {
  bool enabled = false;                // record every rank's per-step breakdown, collectives and memory
  int64_t warmup_steps = 2;            // first steps left out of the summary (start-up, first touches)
  int64_t active_steps = 0;            // steps measured after the warm-up; 0 = all the remaining ones
  bool trace = true;                   // write the Chrome / Perfetto trace (trace.json)
  std::string dir;                     // output directory; empty = launch.log_dir
  double peak_tflops = 0;              // per-rank peak for MFU; 0 = the known GPUs' (A100, H100, H200 bf16), none on CPU
  bool kernels = false;                // gpt: time each kernel region on rank 0, <dir>/kernels.json (plan --from-profile)
};

// Where a key's value came from (for describe_resolved and error messages).
enum class ValueSource : int { kDefault = 0, kFile, kOverride };
struct KeyOrigin {
  ValueSource source = ValueSource::kDefault;
  int line = 0;                        // kFile: position of the value in Config::source
  int column = 0;
  std::string override_text;           // kOverride: "section.key=value" as given to --set
  // A config dp-launch resolved for its ranks (write_config_file) says in each key's
  // comment where the value came from: the user's "file:line:col" or "--set k=v". Read
  // back, errors name that place, not the resolved file's line. Empty otherwise.
  std::string forwarded;
};

struct Config {
  LaunchConfig launch;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  ZeroConfig zero;
  CheckpointConfig checkpoint;
  ProfileConfig profile;

  std::string source = "<defaults>";   // file path, or the name given to parse_config
  std::map<std::string, KeyOrigin> origins;  // "section.key" -> origin; absent = default

  // "file:line:col", "--set section.key=value", or `source` for a default: the prefix of
  // an error about `key`.
  std::string where(const std::string& key) const;
};

// Compares values only: source and origins are ignored.
bool operator==(const Config& a, const Config& b);
inline bool operator!=(const Config& a, const Config& b) { return !(a == b); }

// Parses `text` (named `source_name` in errors) and applies `overrides`, each
// "section.key=value" with the value in TOML syntax (a bare word is taken as a string;
// "launch.env.NAME=value" sets one entry). kInvalidArgument lists every problem, one per
// line, each "file:line:col: ..." or "--set k=v: ...".
StatusOr<Config> parse_config(const std::string& text, const std::string& source_name,
                              const std::vector<std::string>& overrides = {});
// The world size a parsed config will run at (dp-launch derives it from the launch keys,
// the CUDA devices and Slurm); 0 when unknown.
using WorldSizeOf = std::function<int64_t(const Config&)>;
// Reads `path` and parses it as parse_config does; kNotFound when it does not exist;
// kInvalidArgument, naming the path and what it is, for a directory, a FIFO, a device or a
// file over 1 MiB (the read never blocks and never reads more). With `world_size_of`, the
// checks that need the world size (validate_for_world's: the global batch's divisibility,
// accum_steps) run in the same pass, so every problem is listed together.
StatusOr<Config> load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                             const WorldSizeOf& world_size_of = nullptr);

// Every range and cross-field check, plus those that need the world size (global_batch
// divisible by micro_batch x world, accum_steps consistent). All problems in one Status.
Status validate_for_world(const Config& config, int world_size);
// The same checks for the keys that start with one of `prefixes` ("zero." for a section,
// "model.dtype" for one key), and the checks between those keys only: for code that
// fills part of a Config without parsing TOML (EngineOptions::validate), so that every
// range is written once, in the key table.
Status validate_keys(const Config& config, const std::vector<std::string>& prefixes);
// The directories a run writes, checked before it starts (dp-launch, --dry-run included,
// and dp-train): launch.log_dir, checkpoint.dir when set, profile.dir when profiling.
// Each must be a writable directory, or not exist yet under a writable one (it is created
// then). kInvalidArgument lists every problem as "file:line:col: key (\"dir\") ...".
Status check_output_dirs(const Config& config);
// The files a dp-train run reads, checked before it starts (dp-launch, for dp-train's
// ranks): data.path and data.val_path of a gpt on data.kind = "tokens" (one file, or a
// glob pattern matching at least one; each a token file, by its header, of at least one
// sample, model.seq_len + 1 tokens; no file in both), and
// checkpoint.resume when it names a path (a checkpoint, or a folder holding one).
// kNotFound lists every problem as "file:line:col: key ...". Another program reads these
// keys as it likes; dp-launch --dry-run makes the same problems notes (a config for
// another cluster's files).
Status check_input_paths(const Config& config);
// What dp-train's models (model.kind) cannot run that `config` asks for: the mlp computes
// in fp32 only (its synthetic features are fp32), so a 16-bit model.dtype with it is
// kInvalidArgument naming where the dtype was set. Another program that embeds zdp reads
// model.dtype for its own model: only dp-launch (for dp-train's ranks), dp-train and the
// planner's commands ask this.
Status check_model_support(const Config& config);
// The settings of `config` that do nothing in it: keys the file or --set gave (defaults
// are never listed) for a feature that is off or does not apply, e.g. zero.prefetch_layers
// below stage 3, train.eval_every without held-out data. Each "where: key has no effect:
// why". Not errors: a config may keep them for another setup (a stage-3 config run with
// --set zero.stage=2). Keys that can only be a mistake are refused by the checks above
// instead. dp-launch prints these as notes for dp-train's ranks (--dry-run too), and
// dp-train's rank 0 when no dp-launch started it.
std::vector<std::string> inert_settings(const Config& config);
// What every node of a multi-node job must share: one "section.key = value" line per key,
// in --help's order, for every key but per_node_keys(); of the per-node paths (data.path,
// data.val_path, checkpoint.dir, profile.dir) only whether each is set ("a path" or
// "empty"), and of checkpoint.resume only "a checkpoint path" for a path. Each node's dp-launch compares its own with node 0's
// before any rank starts, and a node whose config differs is refused, naming the keys.
std::string job_wide_settings(const Config& config);
// The keys each node may set for itself: its node rank, addresses and interface, the
// rank program's path and arguments, the rank environment and the paths (log, data,
// checkpoint and profile directories), which mount points may spell differently.
const std::vector<std::string>& per_node_keys();
// accum_steps, or global_batch / (micro_batch x world_size) when it is 0.
// REQUIRES: validate_for_world(config, world_size).ok().
int64_t resolved_accum_steps(const TrainConfig& train, int world_size);
// nproc_per_node, or for "auto" the CUDA device count, or kCpuDefaultNprocPerNode without one.
int resolve_nproc_per_node(const LaunchConfig& launch, int cuda_device_count);
// kNccl or kGloo: `backend` unless it is kAuto.
Backend resolve_backend(Backend backend, bool ranks_use_cuda);

// The full resolved config as TOML (every key): parse_config(to_toml(c), ...) == c.
std::string to_toml(const Config& config);
// Writes describe_resolved(config) (to_toml with each value's origin in its comment) to
// `path` through a temporary file and a rename (what dp-launch passes to its ranks as
// ZDP_CONFIG): parsed back, each key's KeyOrigin::forwarded is that origin, so a rank's
// error names the user's file and line. kIoError names the path.
Status write_config_file(const Config& config, const std::string& path);
// For --dry-run: to_toml with each value's origin (default | file:line:col | --set ...)
// as a trailing comment; still valid TOML.
std::string describe_resolved(const Config& config);
// For --help: every key by section, with its type, allowed values, default and meaning.
std::string key_reference();

}  // namespace zdp
