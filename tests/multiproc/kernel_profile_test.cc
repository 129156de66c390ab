// profile.kernels (trainer/models/kernel_regions.h, trainer/loop/kernel_profile.h): the
// KernelTimer's arithmetic on the CPU clock; a profiled gpt run at K = 2 (forked ranks,
// Gloo) whose kernels.json names exactly the regions the planner predicts, each entered as
// often as the model runs it, their times inside the profile's forward + backward; and
// `dp-launch plan --from-profile` of it: refused as a CPU profile, compared row by row when
// labelled as a GPU's, and beside a baseline (--baseline: a copy with other region times; two
// CPU runs side by side too).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "planner/gpu_step_model.h"
#include "planner/kernel_profile_file.h"
#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "testing/run_command.h"
#include "testing/temp_dir.h"
#include "trainer/loop/train_loop.h"
#include "trainer/models/kernel_regions.h"
#include "trainer/models/model_spec.h"
#include "zdp/memory_plan.h"
#include "zdp/context.h"

namespace zdp::trainer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

TEST(KernelTimer, RegionsLastUntilTheNextBoundaryAndOnlyWhileArmed) {
  std::unique_ptr<Device> device = create_cpu_device();
  StatusOr<std::unique_ptr<Stream>> stream = device->create_stream("compute");
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  StatusOr<std::unique_ptr<KernelTimer>> timer = KernelTimer::create(*device, **stream);
  ASSERT_TRUE(timer.ok()) << timer.status().to_string();
  KernelTimer& t = **timer;
  t.enter(KernelRegion::kQkvFwd);  // not armed: nothing
  std::this_thread::sleep_for(5ms);
  t.arm();
  t.enter(KernelRegion::kQkvFwd);
  std::this_thread::sleep_for(30ms);
  t.enter(KernelRegion::kResidualAdd);
  std::this_thread::sleep_for(10ms);
  t.leave();
  std::this_thread::sleep_for(20ms);  // between regions: nobody's
  t.enter(KernelRegion::kQkvFwd);
  std::this_thread::sleep_for(10ms);
  t.disarm();  // ends the open region
  t.collect();
  std::this_thread::sleep_for(20ms);
  t.enter(KernelRegion::kResidualAdd);  // disarmed again
  const RegionTimes& r = t.times();
  const auto qkv = static_cast<size_t>(KernelRegion::kQkvFwd), add = static_cast<size_t>(KernelRegion::kResidualAdd);
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.entries[qkv], 2);
  EXPECT_EQ(r.entries[add], 1);
  EXPECT_GE(r.seconds[qkv], 0.040);
  EXPECT_LT(r.seconds[qkv], 0.040 + 0.015);  // not the 20 ms between regions, nor the unarmed 5 ms
  EXPECT_GE(r.seconds[add], 0.010);
  EXPECT_LT(r.seconds[add], 0.010 + 0.015);
  std::string names;
  for (int i = 0; i < kNumKernelRegions; ++i) {
    KernelRegion back;
    ASSERT_TRUE(region_from_name(region_name(static_cast<KernelRegion>(i)), &back)) << i;
    EXPECT_EQ(static_cast<int>(back), i);
  }
}

constexpr int kLayers = 2, kAccum = 2, kSteps = 6, kWarmup = 2;

Config gpt_config(const std::string& dir) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = kLayers;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.vocab_size = 64;
  c.model.seq_len = 16;
  c.data.kind = DataKind::kSynthetic;
  c.train.global_batch = 16;
  c.train.micro_batch = 4;  // accum_steps 2 at K = 2
  c.train.steps = kSteps;
  c.train.log_every = 1000;
  c.train.eval_every = 0;
  c.zero.stage = 2;
  c.profile.enabled = true;
  c.profile.kernels = true;
  c.profile.warmup_steps = kWarmup;
  c.profile.trace = false;
  c.profile.dir = dir;
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(KernelProfile, AProfiledGptRunTimesThePlannersRegions) {
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/profile";
  const Config config = gpt_config(dir);
  const std::string console = tmp.path() + "/console.txt";
  auto results = testing::fork_ranks(2, [&](int rank, int k, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store, 1, config));
    std::FILE* out = std::fopen(rank == 0 ? console.c_str() : "/dev/null", "w");
    StatusOr<TrainSummary> s = train(ctx, config, {out});
    std::fclose(out);
    return s.status();
  });
  ASSERT_EQ(testing::describe_failures(results), "");
  EXPECT_NE(read_file(console).find("kernels (rank 0, profile.kernels; mean over 4 measured steps"), std::string::npos)
      << read_file(console);

  const json k = json::parse(read_file(dir + "/kernels.json"));
  EXPECT_EQ(k.at("format"), kKernelTimesFormat);
  EXPECT_EQ(k.at("device_kind"), "cpu");
  EXPECT_EQ(k.at("steps"), kSteps - kWarmup);
  EXPECT_EQ(k.at("model").at("accum_steps"), kAccum);
  EXPECT_EQ(k.at("model").at("fused_attention"), false);
  EXPECT_EQ(k.at("model").at("dgelu_epilogue"), false);  // a CPU's GELU backward is a kernel
  // What the engine ran: the buckets it laid out for a rank of 2 (plan_memory's, which
  // are the engine's to the byte), its reduce dtype and accumulation.
  const json& engine = k.at("engine");
  EXPECT_EQ(engine.at("deterministic"), false);
  EXPECT_EQ(engine.at("reduce_dtype"), "fp32");
  EXPECT_EQ(engine.at("sharded_accumulation"), false);
  StatusOr<ModelSpec> spec = model_spec(config);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  StatusOr<EngineOptions> at_two = EngineOptions::from(config, 2);
  ASSERT_TRUE(at_two.ok()) << at_two.status().to_string();
  at_two->nested_layer_scopes = spec->nested_layer_scopes;
  StatusOr<MemoryPlan> layout = plan_memory(spec->params, *at_two, 2, DeviceKind::kCpu);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(engine.at("buckets").get<std::vector<int64_t>>(), layout->bucket_elems);
  std::map<std::string, double> entries, ms;
  for (const json& r : k.at("regions")) {
    entries[r.at("name")] = r.at("entries_per_step").get<double>();
    ms[r.at("name")] = r.at("ms_per_step").get<double>();
  }
  // Exactly the regions of the planner's batched-attention prediction, the engine's gradient
  // hand-off included, its optimizer and norm aside (the comparison takes them from the
  // profile's parts).
  launcher::GptShape shape;
  shape.layers = kLayers, shape.d_model = 32, shape.heads = 2, shape.vocab = 64, shape.seq = 16;
  shape.micro_batch = 4, shape.accum_steps = kAccum, shape.elem_bytes = 4, shape.params = 1;
  std::set<std::string> predicted, measured;
  for (const launcher::KernelCost& c : launcher::predict_gpt_step(shape, *launcher::find_gpu("h200")).kernels) {
    if (!c.per_step || c.region == KernelRegion::kGradHandoff) predicted.insert(region_name(c.region));
  }
  for (const auto& [name, n] : entries) measured.insert(name);
  EXPECT_EQ(measured, predicted);
  // Entered per step as the model runs them: L + 1 layernorms forward (the blocks' ln1 and
  // the final one), 2L + 1 backward, two runs of attention GEMMs per layer backward.
  EXPECT_EQ(entries["layernorm fwd"], (kLayers + 1) * kAccum);
  EXPECT_EQ(entries["layernorm bwd (dx, dweight, dbias)"], (2 * kLayers + 1) * kAccum);
  EXPECT_EQ(entries["attention bwd GEMMs (dP, dV, dQ, dK)"], 2 * kLayers * kAccum);
  EXPECT_EQ(entries["qkv linear fwd"], kLayers * kAccum);
  EXPECT_EQ(entries["embedding bwd"], kAccum);
  // The regions lie inside rank 0's steps, and cover a good part of their forward +
  // backward. (Not "inside the forward + backward": the region points and the profile's
  // phase marks are stamped by different clocks of the CPU stream, at once or when its
  // worker reaches them (runtime/internal/stream_clock.h), and on 2 busy cores the regions
  // measured 0.59-1.18 of that span.)
  double regions = 0, compute = 0, step = 0;
  int steps = 0;
  for (const auto& [name, v] : ms) regions += v;
  std::ifstream lines(dir + "/profile.jsonl");
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line);
    if (j.value("type", "") == "step" && j.value("rank", -1) == 0) {
      compute += j.at("compute_ms").get<double>(), step += j.at("step_ms").get<double>(), ++steps;
    }
  }
  ASSERT_EQ(steps, kSteps - kWarmup);
  compute /= steps, step /= steps;
  EXPECT_GT(regions, 0.3 * compute) << "regions " << regions << " ms, forward + backward " << compute << " ms";
  EXPECT_LT(regions, step) << "regions " << regions << " ms, step " << step << " ms";

  // dp-launch plan --from-profile: a CPU profile is refused; labelled as an H200's, every
  // predicted region has its measured time.
  const std::string cfg = tmp.path() + "/gpt.toml";
  std::ofstream(cfg) << "[launch]\nnproc_per_node = 2\nbackend = \"nccl\"\nlog_dir = \"" << tmp.path() + "/plan"
                     << "\"\n[model]\nkind = \"gpt\"\nn_layers = 2\nd_model = 32\nn_heads = 2\nvocab_size = 64\n"
                        "seq_len = 16\ndtype = \"fp32\"\n[data]\nkind = \"synthetic\"\n[train]\nglobal_batch = 16\n"
                        "micro_batch = 4\nsteps = 6\n";
  const std::string plan = std::string(ZDP_DP_LAUNCH) + " plan " + cfg + " --from-profile " + dir;
  testing::CommandRun cpu = testing::run_command(plan);
  EXPECT_EQ(cpu.exit_code, 2) << cpu.output;
  EXPECT_NE(cpu.output.find("measured on cpu ranks"), std::string::npos) << cpu.output;
  EXPECT_NE(cpu.output.find("--baseline DIR0"), std::string::npos) << cpu.output;
  // ... but two CPU runs side by side are compared (here the run against a copy of itself:
  // nothing moved), with no GPU step model, and not with --gpu.
  const std::string cpu_base = tmp.path() + "/cpu-baseline";
  fs::create_directories(cpu_base);
  fs::copy_file(dir + "/kernels.json", cpu_base + "/kernels.json");
  fs::copy_file(dir + "/profile.jsonl", cpu_base + "/profile.jsonl");
  testing::CommandRun cpus = testing::run_command(plan + " --baseline " + cpu_base);
  ASSERT_EQ(cpus.exit_code, 0) << cpus.output;
  EXPECT_NE(cpus.output.find("MEASURED vs BASELINE (--baseline " + cpu_base + "): both on cpu"), std::string::npos)
      << cpus.output;
  EXPECT_NE(cpus.output.find("moved by 3% or more: none"), std::string::npos) << cpus.output;
  EXPECT_EQ(cpus.output.find("GPU step model vs MEASURED"), std::string::npos) << cpus.output;
  testing::CommandRun cpus_gpu = testing::run_command(plan + " --baseline " + cpu_base + " --gpu h200");
  EXPECT_EQ(cpus_gpu.exit_code, 2) << cpus_gpu.output;
  EXPECT_NE(cpus_gpu.output.find("or two CPU runs side by side: without --gpu, --baseline DIR0"), std::string::npos)
      << cpus_gpu.output;

  json as_gpu = k;
  as_gpu["device"] = "NVIDIA H200";
  as_gpu["device_kind"] = "cuda";
  std::ofstream(dir + "/kernels.json") << as_gpu.dump();
  testing::CommandRun gpu = testing::run_command(plan);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("GPU step model vs MEASURED"), std::string::npos) << gpu.output;
  EXPECT_EQ(gpu.output.find("not measured"), std::string::npos) << gpu.output;
  EXPECT_EQ(gpu.output.find("prediction has no kernel"), std::string::npos) << gpu.output;
  // A CPU's times relabelled as an H200's: every kernel launch-bound at the GPU's rates, no
  // efficiency class measured, and the plan says so rather than "calibrated from" it.
  EXPECT_NE(gpu.output.find("nothing calibrated (no efficiency class measured)"), std::string::npos) << gpu.output;
  EXPECT_EQ(gpu.output.find("calibrated from " + dir), std::string::npos) << gpu.output;
  EXPECT_EQ(gpu.output.find("note: the profile ran"), std::string::npos) << gpu.output;
  // A profile of the other attention path, or another 16-bit dtype, calibrates what it can
  // and says what it cannot (the world table plans the config's path).
  const std::string fused_dir = tmp.path() + "/fused";
  fs::create_directories(fused_dir);
  json fused = as_gpu;
  fused["model"]["fused_attention"] = true;
  fused["engine"]["reduce_dtype"] = "bf16";
  std::ofstream(fused_dir + "/kernels.json") << fused.dump();
  testing::CommandRun other_path = testing::run_command(std::string(ZDP_DP_LAUNCH) + " plan " + cfg +
                                                        " --from-profile " + fused_dir);
  EXPECT_NE(other_path.output.find("note: the profile ran fused attention and this config plans batched"),
            std::string::npos)
      << other_path.output;
  EXPECT_NE(other_path.output.find("note: the profile reduced gradients in bf16 and this config in 32-bit"),
            std::string::npos)
      << other_path.output;
  // An H200's profile read against another GPU's datasheet gave efficiencies of 297%.
  testing::CommandRun other_gpu = testing::run_command(plan + " --gpu a100-80g");
  EXPECT_EQ(other_gpu.exit_code, 2) << other_gpu.output;
  EXPECT_NE(other_gpu.output.find("was measured on 'NVIDIA H200' (h200), not on --gpu a100-80g"), std::string::npos)
      << other_gpu.output;
  // A part the table does not know is not planned as its family's SXM part.
  json pcie = as_gpu;
  pcie["device"] = "NVIDIA H100 PCIe";
  const std::string pcie_dir = tmp.path() + "/pcie";
  fs::create_directories(pcie_dir);
  std::ofstream(pcie_dir + "/kernels.json") << pcie.dump();
  testing::CommandRun unknown =
      testing::run_command(std::string(ZDP_DP_LAUNCH) + " plan " + cfg + " --from-profile " + pcie_dir);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("the profile's device 'NVIDIA H100 PCIe' is not a GPU this planner knows"),
            std::string::npos) << unknown.output;
  StatusOr<launcher::MeasuredKernels> read = launcher::read_measured_kernels(dir);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->profile_steps, kSteps - kWarmup);

  // --baseline: a copy of the run whose cross-entropy took twice as long and which had a
  // residual add region of 1 ms; beside this run, those two moved and nothing else did.
  const std::string base = tmp.path() + "/baseline";
  fs::create_directories(base);
  fs::copy_file(dir + "/profile.jsonl", base + "/profile.jsonl");
  json slower = as_gpu;
  for (json& r : slower["regions"]) {
    if (r["name"] == "cross-entropy (loss, dlogits)") r["ms_per_step"] = 2 * r["ms_per_step"].get<double>();
  }
  slower["regions"].push_back({{"name", "residual add"}, {"ms_per_step", 1.0}, {"entries_per_step", 4.0}});
  std::ofstream(base + "/kernels.json") << slower.dump();
  testing::CommandRun diffed = testing::run_command(plan + " --baseline " + base);
  ASSERT_EQ(diffed.exit_code, 0) << diffed.output;
  EXPECT_NE(diffed.output.find("MEASURED vs BASELINE (--baseline " + base + "): both on NVIDIA H200"), std::string::npos)
      << diffed.output;
  const size_t moved_at = diffed.output.find("moved by 3% or more: ");
  ASSERT_NE(moved_at, std::string::npos) << diffed.output;
  const std::string moved = diffed.output.substr(moved_at, diffed.output.find('\n', moved_at) - moved_at);
  EXPECT_NE(moved.find("residual add 1.000 -> - ms (gone)"), std::string::npos) << moved;
  EXPECT_NE(moved.find("cross-entropy (loss, dlogits)"), std::string::npos) << moved;
  EXPECT_NE(moved.find("(0.500x)"), std::string::npos) << moved;
  EXPECT_EQ(std::count(moved.begin(), moved.end(), ';'), 1) << moved;  // those two only
  // Without --from-profile, or against another model, --baseline is refused.
  testing::CommandRun alone = testing::run_command(std::string(ZDP_DP_LAUNCH) + " plan " + cfg + " --baseline " + base);
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("give both"), std::string::npos) << alone.output;
  json other = slower;
  other["model"]["d_model"] = 64;
  std::ofstream(base + "/kernels.json") << other.dump();
  testing::CommandRun refused = testing::run_command(plan + " --baseline " + base);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("model.d_model is 64 there and 32 here"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace zdp::trainer
