// What `dp-launch plan --from-profile DIR` reads: <DIR>/kernels.json, written by a dp-train
// profiling run with profile.kernels (trainer/loop/kernel_profile.h: rank 0's mean time per
// step of each kernel region), and rank 0's step lines of <DIR>/profile.jsonl (the step
// time and the optimizer's part). Both are bounded and validated before use: a file that
// is not what dp-train writes is refused naming the file and the field.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/models/kernel_regions.h"
#include "zdp/status.h"

namespace zdp::launcher {

struct MeasuredKernels {
  std::string dir;
  std::string device;       // "NVIDIA H200", "cpu"
  std::string device_kind;  // "cuda", "cpu"
  // The run's ranks and ZeRO stage: the optimizer part is one rank's share of the update
  // at stages 1-3. A version-1 file has neither: read as one rank (stage 0).
  int64_t world_size = 1, zero_stage = 0;
  int64_t version = 0;  // of kernels.json
  int64_t layers = 0, d_model = 0, heads = 0, vocab = 0, seq = 0, micro_batch = 0, accum_steps = 0;
  std::string dtype;  // "bf16"
  bool fused_attention = false;
  // What the engine ran (version 3; `has_engine` false for older files, which record
  // none of it): its rows of the step model are priced on these, not the config's.
  bool has_engine = false;
  bool dgelu_epilogue = false;  // fc proj's dx GEMM took cuBLASLt's DGELU epilogue
  bool deterministic = false;
  std::string reduce_dtype;  // "fp32", "bf16"
  bool sharded_accumulation = false;
  std::vector<int64_t> buckets;  // each bucket's padded elements, in layout order
  int64_t steps = 0;  // measured steps
  std::array<bool, trainer::kNumKernelRegions> present{};
  std::array<double, trainer::kNumKernelRegions> seconds{};   // per step
  std::array<double, trainer::kNumKernelRegions> entries{};   // per step
  // From profile.jsonl (rank 0's step lines); < 0 when the file has none.
  double step_s = -1;
  double optimizer_s = -1;
  double norm_s = -1;  // the profile's "norm" part: the gradient statistics, their all-reduce and the decision
  double exposed_comm_s = -1;
  int64_t profile_steps = 0;  // step lines read
};

// Reads <dir>/kernels.json (required) and <dir>/profile.jsonl (optional: without it the
// step and optimizer columns are empty).
StatusOr<MeasuredKernels> read_measured_kernels(const std::string& dir);

// The two files' parsers, for text already read (`path` names it in errors): what
// read_measured_kernels does with each file, and what tests/fuzz/profile_files_fuzz.cc
// feeds hostile text. kernels.json fills the model, device and regions of `m`;
// profile.jsonl its step, optimizer and exposed-communication columns (left < 0 when the
// text has no step line of rank 0). Either refuses what dp-train would not write, naming
// the file, the line where there are lines, and the field.
Status parse_kernel_times(const std::string& text, const std::string& path, MeasuredKernels* m);
Status parse_profile_steps(const std::string& text, const std::string& path, MeasuredKernels* m);

// The planner's GPU name for a device's exact CUDA name ("NVIDIA H200" -> "h200",
// gpu_of_device); "" for any other ("NVIDIA H100 PCIe" is not the h100 of the table).
std::string gpu_name_of_device(const std::string& device);

}  // namespace zdp::launcher
