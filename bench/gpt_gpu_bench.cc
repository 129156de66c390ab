// GPT forward + backward on one GPU: measured tokens/s and MFU of a config's model (the
// gpt2-124m config in the GPU check) next to the per-kernel PREDICTION of
// planner/gpu_step_model.h for the named GPU, and their ratio.
//
//   gpt_gpu_bench CONFIG.toml [--gpu h200] [--warmup 3] [--micro 10] [--attention auto|fused|batched]
//
// --attention sets model.attention (the GPU check runs the config's, then "batched", to
// put cuDNN's fused attention next to the strided-batched GEMM path); the prediction
// prices the path the model took.
// Times --micro micro-batches (forward + backward into the gradients, one engine of one
// rank, no reduction, no optimizer step) after --warmup untimed ones, on synthetic tokens.
// Each micro-batch reads its loss back (Model::train_micro): one host wait per micro-batch,
// a drain of the launch queue that dp-train's loop does not have. MFU counts the trainer's
// FLOPs (Model::flops_per_sample) against the GPU's dense peak of the compute dtype.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "planner/gpu_step_model.h"
#include "trainer/models/model.h"
#include "trainer/models/model_spec.h"
#include "zdp/comm.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/device.h"
#include "zdp/engine.h"
#include "zdp/store.h"

namespace {

using namespace zdp;
using namespace std::chrono_literals;

int fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "gpt_gpu_bench: %s: %s\n", what.c_str(), s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: gpt_gpu_bench CONFIG.toml [--gpu h200] [--warmup 3] [--micro 10] [--attention auto|fused|batched]\n");
    return 2;
  }
  const std::string path = argv[1];
  std::string gpu_name = "h200";
  int warmup = 3, micro = 10;
  std::vector<std::string> overrides = {"zero.stage=0"};
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 == argc) {  // a flag without its value (or --help) is not ignored
      std::fprintf(stderr, "gpt_gpu_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string flag = argv[i];
    if (flag == "--gpu") gpu_name = argv[i + 1];
    else if (flag == "--warmup") warmup = std::max(0, std::atoi(argv[i + 1]));
    else if (flag == "--micro") micro = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--attention") overrides.push_back(std::string("model.attention=") + argv[i + 1]);
    else {
      std::fprintf(stderr, "gpt_gpu_bench: unknown flag '%s'\n", flag.c_str());
      return 2;
    }
  }
  const launcher::GpuSpec* spec = launcher::find_gpu(gpu_name);
  if (!spec) {
    std::fprintf(stderr, "gpt_gpu_bench: --gpu %s: not one of %s\n", gpu_name.c_str(), launcher::known_gpu_names().c_str());
    return 2;
  }
  StatusOr<Config> loaded = load_config(path, overrides);
  if (!loaded.ok()) return fail("config " + path, loaded.status());
  Config config = *loaded;
  if (config.model.kind != ModelKind::kGpt) return fail(path, Status(StatusCode::kInvalidArgument, "model.kind must be gpt"));
  if (cuda_device_count() == 0) return fail("cuda", Status(StatusCode::kUnavailable, "no CUDA device"));

  StatusOr<std::unique_ptr<Device>> device = create_cuda_device(0);
  if (!device.ok()) return fail("cuda:0", device.status());
  const std::string device_name = (*device)->name();
  auto store = std::make_unique<InMemoryStore>();
  CommOptions options;
  options.timeout = 60s;
  StatusOr<std::unique_ptr<Communicator>> comm = create_gloo_communicator(*store, 0, 1, **device, options);
  if (!comm.ok()) return fail("communicator", comm.status());
  LaunchEnv env;
  env.origin = "gpt_gpu_bench";
  Context ctx = Context::assemble(env, config, std::move(store), std::move(*device), std::move(*comm), options.timeout);
  StatusOr<EngineOptions> eo = EngineOptions::from(config, 1);
  if (!eo.ok()) return fail("engine options", eo.status());
  eo->zero.overlap = false;
  // No optimizer step is timed: every micro-batch of the run belongs to one step (the
  // engine refuses more micro-batches than a step has), accumulating as training does.
  eo->accum_steps = warmup + micro;
  Engine engine(ctx, *eo);
  StatusOr<std::unique_ptr<trainer::Ops>> ops = trainer::Ops::create(ctx.device(), config.model.dtype, false, config.model.attention);
  if (!ops.ok()) return fail("ops", ops.status());
  StatusOr<std::unique_ptr<trainer::Model>> model = trainer::make_gpt(config.model, config.train.micro_batch, ops->get());
  if (!model.ok()) return fail("model", model.status());
  Status st = (*model)->register_params(engine);
  if (st.ok()) st = engine.finalize();
  if (!st.ok()) return fail("engine", st);
  (*ops)->set_stream(engine.compute_stream());

  trainer::Batch batch;
  batch.count = config.train.micro_batch;
  const int64_t tokens = batch.count * config.model.seq_len;
  // Inputs drawn as text's tokens are (Zipf-Mandelbrot: token r with weight 1 / (r + 2.7);
  // of a GPT-2-sized vocabulary the most frequent is 3.7%, ~600 of 16k positions, as " the"
  // or "," are of web text), since the embedding's backward sums each token's positions in
  // a chain: uniform tokens (0.3 positions a token) would hide what a frequent one costs.
  // Targets uniform.
  std::vector<double> weights(static_cast<size_t>(config.model.vocab_size));
  for (size_t r = 0; r < weights.size(); ++r) weights[r] = 1.0 / (static_cast<double>(r) + 2.7);
  std::mt19937_64 rng(1);
  std::discrete_distribution<int32_t> text_token(weights.begin(), weights.end());
  std::uniform_int_distribution<int32_t> target(0, config.model.vocab_size - 1);
  for (int64_t i = 0; i < tokens; ++i) batch.tokens.push_back(text_token(rng)), batch.labels.push_back(target(rng));

  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  for (int i = 0; i < warmup + micro; ++i) {
    if (i == warmup) start = Clock::now();
    StatusOr<double> loss = (*model)->train_micro(engine, batch);
    if (!loss.ok()) return fail("micro-batch " + std::to_string(i), loss.status());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / micro;
  const bool fp32 = config.model.dtype == DType::kF32;
  const double peak = fp32 ? spec->fp32_flops : spec->bf16_flops;
  const double measured_tps = static_cast<double>(tokens) / seconds;
  const double measured_mfu = (*model)->flops_per_sample() * static_cast<double>(batch.count) / seconds / peak;

  StatusOr<trainer::ModelSpec> ms = trainer::model_spec(config);
  if (!ms.ok()) return fail("model spec", ms.status());
  launcher::GptShape shape;
  const ModelConfig& m = config.model;
  shape.layers = m.n_layers, shape.d_model = m.d_model, shape.heads = m.n_heads, shape.vocab = m.vocab_size;
  shape.seq = m.seq_len, shape.micro_batch = config.train.micro_batch, shape.accum_steps = 1;
  // psi for llm.c's MFU count (6 psi a token); no optimizer step is timed. params = 0
  // dropped the optimizer and llm.c's count with it: its MFU read 3% for 42%.
  shape.elem_bytes = static_cast<int64_t>(dtype_size(m.dtype)), shape.params = ms->psi, shape.optimizer = false;
  shape.fused_attention = (*model)->fused_attention();
  shape.dgelu_epilogue = launcher::plans_dgelu_epilogue(false, m.d_model);  // its Ops is not deterministic
  const launcher::GpuStepPrediction p = launcher::predict_gpt_step(shape, *spec);
  std::printf("%s", launcher::format_gpu_step(p, *spec, launcher::GpuEfficiency{}).c_str());
  std::printf("measured on %s: %.2f ms per micro-batch (%lld tokens), %.0f tokens/s, MFU %.1f%% of the %s peak\n",
              device_name.c_str(), seconds * 1e3, static_cast<long long>(tokens), measured_tps, 100 * measured_mfu,
              spec->name.c_str());
  std::printf("summary: %s, %s attention, fwd+bwd measured %.0f tok/s MFU %.1f%%; predicted %.0f tok/s MFU %.1f%%; measured/predicted %.2f\n",
              (*model)->describe().c_str(), (*model)->fused_attention() ? "fused" : "batched", measured_tps, 100 * measured_mfu, p.tokens_per_s, 100 * p.mfu,
              measured_tps / p.tokens_per_s);
  return 0;
}
