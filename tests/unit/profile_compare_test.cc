// `dp-launch plan --from-profile` (planner/profile_compare.h, kernel_profile_file.h): the
// comparison against hand-computed numbers on a tiny GPT and a made-up GPU (every measured
// region twice its prediction implies half of each assumed efficiency, and the prediction
// with those is twice the old one), the refusals (a CPU profile, another model), and the
// reader's validation of kernels.json and profile.jsonl.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "planner/kernel_profile_file.h"
#include "planner/profile_compare.h"
#include "tests/unit/round_gpu.h"

namespace zdp::launcher {
namespace {

namespace fs = std::filesystem;
using trainer::KernelRegion;

using testing::halves;
// Round numbers where the tiny GPT's GEMMs are bound by FLOPs and its other kernels by
// bytes: 1 TFLOP/s and 1 TB/s (round_gpu.h).
GpuSpec round_gpu() { return testing::round_gpu(1e12); }
GptShape tiny() {
  GptShape s;
  s.layers = 1, s.d_model = 4, s.heads = 2, s.vocab = 8, s.seq = 4, s.micro_batch = 2, s.accum_steps = 1;
  s.elem_bytes = 2, s.params = 1000;
  return s;
}

// A profile of `shape` on a GPU whose every region took `factor` times its prediction.
MeasuredKernels profile_of(const GptShape& shape, int64_t accum, double factor) {
  GptShape ran = shape;
  ran.accum_steps = accum;
  const GpuStepPrediction p = predict_gpt_step(ran, round_gpu(), halves());
  MeasuredKernels m;
  m.dir = "/profiles/tiny";
  m.device = "round GPU", m.device_kind = "cuda";
  m.layers = shape.layers, m.d_model = shape.d_model, m.heads = shape.heads, m.vocab = shape.vocab;
  m.seq = shape.seq, m.micro_batch = shape.micro_batch, m.accum_steps = accum, m.dtype = "bf16";
  m.steps = 10;
  for (const KernelCost& k : p.kernels) {
    const auto r = static_cast<size_t>(k.region);
    if (k.region == KernelRegion::kAdamW) {
      m.optimizer_s = factor * k.time_s;
      continue;
    }
    // The engine's other kernels: the statistics and decision are the profile's norm part;
    // the accumulation has no measurement (it runs inside backward's grad_ready calls).
    if (k.region == KernelRegion::kGradNorm) {
      m.norm_s = (m.norm_s < 0 ? 0 : m.norm_s) + factor * k.time_s;
      continue;
    }
    if (k.region == KernelRegion::kGradHandoff) continue;
    m.present[r] = true;
    m.seconds[r] += factor * k.time_s;
    m.entries[r] = 1;
  }
  m.step_s = 1.0;
  return m;
}

TEST(ProfileCompare, TwiceThePredictionImpliesHalfTheEfficiency) {
  const GptShape shape = tiny();
  const MeasuredKernels m = profile_of(shape, /*accum=*/3, /*factor=*/2.0);
  StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // The profile's 3 micro-batches are what is predicted (the config's 1 is not).
  GptShape ran = shape;
  ran.accum_steps = 3;
  const GpuStepPrediction p = predict_gpt_step(ran, round_gpu(), halves());
  EXPECT_DOUBLE_EQ(c->predicted.busy_s, p.busy_s);
  // Every region measured, twice its prediction.
  EXPECT_TRUE(c->unpredicted.empty());
  // Every region but the engine's accumulation, which runs inside backward's grad_ready
  // calls and has no measurement of its own.
  double predicted = 0, handoff = 0;
  for (const KernelCost& k : p.kernels) handoff += k.region == KernelRegion::kGradHandoff ? k.time_s : 0.0;
  EXPECT_GT(handoff, 0);
  for (const RegionComparison& r : c->rows) {
    if (r.region == KernelRegion::kGradHandoff) {
      EXPECT_LT(r.measured_s, 0);
      continue;
    }
    ASSERT_GE(r.measured_s, 0) << trainer::region_name(r.region);
    EXPECT_NEAR(r.measured_s, 2 * r.predicted_s, 1e-12 * r.predicted_s) << trainer::region_name(r.region);
    predicted += r.predicted_s;
  }
  // Layernorm backward is one region of two kernels (dx; dweight and dbias): 2 x 3 (2L + 1) launches.
  const auto ln = std::find_if(c->rows.begin(), c->rows.end(),
                               [](const RegionComparison& r) { return r.region == KernelRegion::kLayernormBwd; });
  ASSERT_NE(ln, c->rows.end());
  EXPECT_EQ(ln->predicted_launches, 2 * 3 * 3);
  EXPECT_NEAR(predicted, p.busy_s - handoff, 1e-15);
  EXPECT_NEAR(c->measured_regions_s, 2 * (p.busy_s - handoff), 1e-12 * p.busy_s);
  // Work over (datasheet rate x twice the time): half of 0.5, 0.25 and 0.5; no fused attention.
  EXPECT_NEAR(c->implied[0], 0.25, 1e-12);
  EXPECT_NEAR(c->implied[1], 0.125, 1e-12);
  EXPECT_LT(c->implied[2], 0);
  EXPECT_NEAR(c->implied[3], 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(c->calibrated.fused_attention, halves().fused_attention);  // kept as assumed
  // With half the efficiencies every kernel takes twice as long: max(2a, 2b) = 2 max(a, b).
  EXPECT_NEAR(c->recalibrated.busy_s, 2 * p.busy_s, 1e-12 * p.busy_s);
  EXPECT_DOUBLE_EQ(c->measured_step_s, 1.0);

  const std::string text = format_comparison(*c, m, round_gpu());
  EXPECT_NE(text.find("fc proj linear bwd (dx, dW)"), std::string::npos) << text;
  EXPECT_NE(text.find("2.00x"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul 25.0% (50%)"), std::string::npos) << text;
}

TEST(ProfileCompare, AnUnmeasuredRegionIsLeftOutOfTheTotals) {
  const GptShape shape = tiny();
  MeasuredKernels m = profile_of(shape, 1, 1.0);
  const auto ce = static_cast<size_t>(KernelRegion::kCrossEntropy);
  m.present[ce] = false;
  StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  double without = 0;
  for (const RegionComparison& r : c->rows) {
    if (r.region == KernelRegion::kCrossEntropy) EXPECT_LT(r.measured_s, 0);
    else if (r.measured_s >= 0) without += r.predicted_s;
  }
  EXPECT_NEAR(c->predicted_regions_s, without, 1e-15);
  EXPECT_NEAR(c->measured_regions_s, without, 1e-12 * without);
  EXPECT_NE(format_comparison(*c, m, round_gpu()).find("not measured"), std::string::npos);
}

TEST(ProfileCompare, RefusesACpuProfileAndAnotherModel) {
  const GptShape shape = tiny();
  MeasuredKernels m = profile_of(shape, 1, 1.0);
  m.device_kind = "cpu", m.device = "cpu";
  StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("measured on cpu ranks"), std::string::npos) << c.status().to_string();

  m = profile_of(shape, 1, 1.0);
  m.d_model = 8;
  c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("model.d_model is 8 there and 4 in the config"), std::string::npos)
      << c.status().to_string();
  m = profile_of(shape, 1, 1.0);
  m.dtype = "fp32";
  EXPECT_FALSE(compare_with_profile(shape, round_gpu(), halves(), m).ok());
}

// A rank of 8 at stage 1 updates an eighth of the state: its optimizer part, twice the
// prediction of that eighth, implies the same memory efficiency as every other region at
// twice its prediction (compared with the whole update, it implied four times as much).
TEST(ProfileCompare, TheOptimizerPartIsOneRanksShareAtStagesOneToThree) {
  const GptShape shape = tiny();
  MeasuredKernels m = profile_of(shape, 1, 2.0);
  m.world_size = 8, m.zero_stage = 1;
  m.optimizer_s /= 8;
  m.norm_s /= 8;  // every rank takes the statistics of 1/K of the gradient, at every stage
  StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_NEAR(c->implied[3], 0.25, 1e-12);
  for (const RegionComparison& r : c->rows) {
    if (r.region == KernelRegion::kAdamW) {
      EXPECT_NEAR(r.measured_s, 2 * r.predicted_s, 1e-12 * r.predicted_s);
    }
  }
  EXPECT_NE(format_comparison(*c, m, round_gpu()).find("8 rank(s) at stage 1 (the optimizer row"), std::string::npos);
  m.zero_stage = 0;  // stage 0: every rank updates everything, so the same part is 8x too fast
  c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_GT(c->implied[3], 0.25);
}

// The engine's rows are priced for the profile's rank: at K = 8 a bucket's statistics
// still take their launches (a launch floor of 1 ms each here), where scaling one GPU's
// row by 1/8 divided the launches too.
TEST(ProfileCompare, TheEnginesRowsArePricedAtTheProfilesWorldSize) {
  const GptShape shape = tiny();
  MeasuredKernels m = profile_of(shape, 1, 1.0);
  m.world_size = 8, m.zero_stage = 1;
  GpuEfficiency floor = halves();
  floor.launch_s = 1e-3;
  StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), floor, m);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // One bucket: the statistics' 2 launches and the decision's 2, 1 ms each.
  for (const RegionComparison& r : c->rows) {
    if (r.region == KernelRegion::kGradNorm) {
      EXPECT_NEAR(r.predicted_s, 4e-3, 1e-12);
    }
  }
}

// A version-3 profile says what its engine ran: its buckets, determinism and reduce dtype
// price the engine's rows, whatever the config says (three buckets: the statistics' 2
// launches each and the decision's 2, 1 ms each; a deterministic engine folds nothing on
// the compute stream). What differs from the config is noted, one line each.
TEST(ProfileCompare, TheEnginesRowsAreThoseOfTheProfiledEngine) {
  const GptShape shape = tiny();
  MeasuredKernels m = profile_of(shape, 2, 1.0);
  GpuEfficiency floor = halves();
  floor.launch_s = 1e-3;
  auto rows_of = [&](KernelRegion region) {
    StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), floor, m);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    double predicted = -1;
    for (const RegionComparison& r : c.value().rows) {
      if (r.region == region) predicted = r.predicted_s;
    }
    return predicted;
  };
  EXPECT_NEAR(rows_of(KernelRegion::kGradNorm), 4e-3, 1e-12);  // the config's one bucket
  EXPECT_GT(rows_of(KernelRegion::kGradHandoff), 0);           // accumulating over 2 micro-batches
  m.has_engine = true;
  m.buckets = {400, 400, 200};  // tiny()'s 1000 parameters
  m.reduce_dtype = "fp32";
  EXPECT_NEAR(rows_of(KernelRegion::kGradNorm), 8e-3, 1e-12);
  // Buckets of another model (a tenth of this one's parameters) are another run's.
  m.buckets = {100};
  StatusOr<ProfileComparison> other = compare_with_profile(shape, round_gpu(), floor, m);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("its engine's 1 buckets hold 100 elements, and the config's model has 1000"),
            std::string::npos)
      << other.status().message();
  m.buckets = {400, 400, 200};
  EXPECT_EQ(profile_differences(shape, "bf16", m), "");
  m.deterministic = true;
  EXPECT_LT(rows_of(KernelRegion::kGradHandoff), 0);  // no such row
  m.reduce_dtype = "bf16";
  const std::string notes = profile_differences(shape, "bf16", m);
  EXPECT_NE(notes.find("note: the profile ran with train.deterministic on and this config has it off"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("note: the profile reduced gradients in bf16 and this config in 32-bit"), std::string::npos)
      << notes;
  EXPECT_EQ(std::count(notes.begin(), notes.end(), '\n'), 2) << notes;
  // A profile of an older version records no engine: nothing to say about it.
  m.has_engine = false;
  EXPECT_EQ(profile_differences(shape, "bf16", m), "");
}

// Times no GPU measures: a region faster than four times the datasheet (here 1e-300 s),
// regions that add up to more than the step (one region of 1e6 s in a 1 s step).
TEST(ProfileCompare, RefusesTimesTheGpuCannotHaveMeasured) {
  const GptShape shape = tiny();
  const auto qkv = static_cast<size_t>(KernelRegion::kQkvFwd);
  MeasuredKernels m = profile_of(shape, 1, 1.0);
  m.seconds[qkv] = 1e-300;
  StatusOr<ProfileComparison> c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("region 'qkv linear fwd' took 1e-297 ms"), std::string::npos)
      << c.status().message();
  m.seconds[qkv] = 0;  // "not measured" in the table before
  EXPECT_FALSE(compare_with_profile(shape, round_gpu(), halves(), m).ok());
  m = profile_of(shape, 1, 1.0);
  m.seconds[qkv] = 1e6;
  c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("more than the whole step profile.jsonl measured (1000.000 ms)"),
            std::string::npos)
      << c.status().message();
  // No step lines: nothing to compare the sum with, but the matmuls' class then reached
  // far below 0.1% of the datasheet's rate (it was taken: "0.0%" efficiencies and a
  // recalibrated step of a million seconds).
  m.step_s = -1;
  c = compare_with_profile(shape, round_gpu(), halves(), m);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("its matmul kernels took"), std::string::npos) << c.status().message();
  m = profile_of(shape, 1, 100.0);  // every region 100x its prediction at 50%: 0.5%, taken
  m.step_s = -1;
  EXPECT_TRUE(compare_with_profile(shape, round_gpu(), halves(), m).ok());
}

TEST(ProfileCompare, GpuNamesFromDeviceNames) {
  EXPECT_EQ(gpu_name_of_device("NVIDIA H200"), "h200");
  EXPECT_EQ(gpu_name_of_device("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(gpu_name_of_device("NVIDIA A100-SXM4-80GB"), "a100-80g");
  EXPECT_EQ(gpu_name_of_device("cpu"), "");
}

class KernelProfileFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zdp_kernel_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string kernels(const std::string& regions, const std::string& format = "zdp-kernel-times") {
    return R"({"format": ")" + format + R"(", "version": 1, "rank": 0, "device": "NVIDIA H200", "device_kind": "cuda",
      "model": {"layers": 12, "d_model": 768, "heads": 12, "vocab": 50257, "seq": 1024, "micro_batch": 16,
                "accum_steps": 2, "dtype": "bf16", "fused_attention": true},
      "steps": 20, "regions": [)" + regions + "]}";
  }
  std::string error() {
    StatusOr<MeasuredKernels> m = read_measured_kernels(dir_.string());
    return m.ok() ? std::string("ok") : m.status().message();
  }
  fs::path dir_;
};

TEST_F(KernelProfileFile, ReadsRegionsAndRankZerosStepLines) {
  write("kernels.json", kernels(R"J({"name": "qkv linear fwd", "entries_per_step": 24, "ms_per_step": 1.5},
                                    {"name": "fused attention bwd (cuDNN)", "entries_per_step": 24, "ms_per_step": 4})J"));
  write("profile.jsonl",
        R"({"type":"step","rank":0,"step":3,"step_ms":40,"exposed_comm_ms":1,"parts_ms":{"optimizer":2}})" "\n"
        R"({"type":"step","rank":1,"step":3,"step_ms":99,"exposed_comm_ms":9,"parts_ms":{"optimizer":9}})" "\n"
        R"({"type":"step","rank":0,"step":4,"step_ms":44,"exposed_comm_ms":3,"parts_ms":{"optimizer":4}})" "\n"
        R"({"type":"summary","steps":2})" "\n");
  StatusOr<MeasuredKernels> m = read_measured_kernels(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->device, "NVIDIA H200");
  EXPECT_EQ(m->layers, 12);
  EXPECT_EQ(m->accum_steps, 2);
  EXPECT_TRUE(m->fused_attention);
  const auto qkv = static_cast<size_t>(KernelRegion::kQkvFwd);
  EXPECT_TRUE(m->present[qkv]);
  EXPECT_DOUBLE_EQ(m->seconds[qkv], 1.5e-3);
  EXPECT_DOUBLE_EQ(m->entries[qkv], 24);
  EXPECT_FALSE(m->present[static_cast<size_t>(KernelRegion::kLmHeadFwd)]);
  EXPECT_EQ(m->profile_steps, 2);
  EXPECT_DOUBLE_EQ(m->step_s, 42e-3);
  EXPECT_DOUBLE_EQ(m->optimizer_s, 3e-3);
  EXPECT_DOUBLE_EQ(m->exposed_comm_s, 2e-3);
  EXPECT_EQ(m->world_size, 1);  // version 1: one rank's run
  EXPECT_EQ(m->zero_stage, 0);
  std::string v2 = kernels("");
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2, \"world_size\": 8, \"zero_stage\": 2");
  write("kernels.json", v2);
  m = read_measured_kernels(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->world_size, 8);
  EXPECT_EQ(m->zero_stage, 2);
  v2.replace(v2.find("\"zero_stage\": 2"), 15, "\"zero_stage\": 4");
  write("kernels.json", v2);
  EXPECT_NE(error().find("zero_stage"), std::string::npos) << error();
}

TEST_F(KernelProfileFile, ReadsWhatAVersionThreeEngineRan) {
  std::string v3 = kernels("");
  v3.replace(v3.find("\"version\": 1"), 12, "\"version\": 3, \"world_size\": 2, \"zero_stage\": 1");
  v3.replace(v3.find("\"fused_attention\": true"), 23, "\"fused_attention\": true, \"dgelu_epilogue\": true");
  const std::string engine =
      R"("engine": {"deterministic": false, "reduce_dtype": "bf16", "sharded_accumulation": false, "buckets": [8, 6]}, )";
  const size_t steps_at = v3.find("\"steps\"");
  write("kernels.json", v3.substr(0, steps_at) + engine + v3.substr(steps_at));
  StatusOr<MeasuredKernels> m = read_measured_kernels(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->has_engine);
  EXPECT_TRUE(m->dgelu_epilogue);
  EXPECT_FALSE(m->deterministic);
  EXPECT_EQ(m->reduce_dtype, "bf16");
  EXPECT_EQ(m->buckets, (std::vector<int64_t>{8, 6}));
  // Version 3 without what it must hold, or with what dp-train does not write.
  write("kernels.json", v3);
  EXPECT_NE(error().find("engine is missing"), std::string::npos) << error();
  auto with_engine = [&](const std::string& from, const std::string& to) {
    std::string e = engine;
    e.replace(e.find(from), from.size(), to);
    write("kernels.json", v3.substr(0, steps_at) + e + v3.substr(steps_at));
    return error();
  };
  EXPECT_NE(with_engine("\"bf16\"", "\"int8\"").find("engine.reduce_dtype is 'int8'"), std::string::npos);
  EXPECT_NE(with_engine("[8, 6]", "[]").find("engine.buckets is missing, empty"), std::string::npos);
  EXPECT_NE(with_engine("[8, 6]", "[8, 0]").find("engine.buckets[1]"), std::string::npos);
  EXPECT_NE(with_engine("[8, 6]", "[8, 1e300]").find("engine.buckets[1]"), std::string::npos);
  EXPECT_NE(with_engine("\"deterministic\": false", "\"deterministic\": 0").find("engine.deterministic"),
            std::string::npos);
  std::string no_dgelu = v3;
  no_dgelu.replace(no_dgelu.find(", \"dgelu_epilogue\": true"), 24, "");
  write("kernels.json", no_dgelu.substr(0, steps_at - 24) + engine + no_dgelu.substr(steps_at - 24));
  EXPECT_NE(error().find("model.dgelu_epilogue is missing"), std::string::npos) << error();
}

TEST_F(KernelProfileFile, RefusesWhatDpTrainDoesNotWrite) {
  EXPECT_NE(error().find("profile.kernels = true"), std::string::npos) << error();  // no file yet
  write("kernels.json", "[1, 2");
  EXPECT_NE(error().find("not a JSON object"), std::string::npos) << error();
  write("kernels.json", kernels("", "something-else"));
  EXPECT_NE(error().find("format is 'something-else'"), std::string::npos) << error();
  write("kernels.json", kernels(R"({"name": "warp drive", "entries_per_step": 1, "ms_per_step": 1})"));
  EXPECT_NE(error().find("'warp drive' is not a gpt kernel region"), std::string::npos) << error();
  write("kernels.json", kernels(R"({"name": "residual add", "entries_per_step": 1, "ms_per_step": -1})"));
  EXPECT_NE(error().find("regions[0].ms_per_step"), std::string::npos) << error();
  write("kernels.json", kernels(R"({"name": "residual add", "entries_per_step": 1, "ms_per_step": 1},
                                   {"name": "residual add", "entries_per_step": 1, "ms_per_step": 1})"));
  EXPECT_NE(error().find("appears twice"), std::string::npos) << error();
  std::string huge_layers = kernels("");
  huge_layers.replace(huge_layers.find("\"layers\": 12"), 12, "\"layers\": 1e9");
  write("kernels.json", huge_layers);
  EXPECT_NE(error().find("model.layers"), std::string::npos) << error();
  write("kernels.json", kernels(""));
  write("profile.jsonl", R"({"type":"step","rank":0,"step_ms":"fast"})" "\n");
  EXPECT_NE(error().find("profile.jsonl: line 1: step_ms"), std::string::npos) << error();
  // Mistyped fields are refused, not thrown (found by tests/fuzz/profile_files_fuzz.cc:
  // json's value() threw, and dp-launch plan ended in std::terminate). A line whose type
  // is not the string "step" is someone else's and skipped; a step line must say whose.
  write("profile.jsonl", R"({"type":7,"step":1})" "\n" R"({"type":"step","rank":"zero","step_ms":1})" "\n");
  EXPECT_NE(error().find("profile.jsonl: line 2: rank is not an integer"), std::string::npos) << error();
  write("profile.jsonl", R"({"type":7,"step":1})" "\n");
  EXPECT_EQ(error(), "ok");
  // A line cut short, wherever it is cut (before its "step" key too), is refused.
  write("profile.jsonl", R"({"type":"step","rank":0,"step_ms":40,"exposed_comm_ms":1,"parts_ms":{"optimizer":2}})" "\n"
                         R"({"exposed_comm_ms":1,"parts)" "\n");
  EXPECT_NE(error().find("profile.jsonl: line 2 is not a JSON object (a file cut short?)"), std::string::npos) << error();
  fs::remove(dir_ / "profile.jsonl");
  fs::create_directory(dir_ / "profile.jsonl");  // a directory where the file should be
  EXPECT_NE(error().find("is a directory"), std::string::npos) << error();
}

}  // namespace
}  // namespace zdp::launcher
