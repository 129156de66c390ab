// The GPU table (gpu_datasheets.h).
#include "runtime/internal/gpu_datasheets.h"

namespace zdp {
namespace {

// Datasheet numbers (dense, no sparsity; one direction of each link per GPU). Memory is
// the total nvidia-smi reports, in MiB (the "80 GB" of a datasheet is not 80e9 bytes):
//  - A100 SXM 40GB / 80GB: NVIDIA A100 datasheet (312 TFLOP/s bf16, 19.5 fp32; HBM2
//    1,555 GB/s, HBM2e 2,039 GB/s; NVLink 3 600 GB/s both directions); HDR InfiniBand
//    200 Gb/s per GPU (DGX A100). nvidia-smi: 40960 MiB, 81920 MiB.
//  - H100 SXM 80GB: NVIDIA H100 datasheet (989 TFLOP/s bf16, 67 fp32, 3.35 TB/s HBM3;
//    NVLink 4 900 GB/s both directions); NDR InfiniBand 400 Gb/s per GPU (DGX H100).
//    nvidia-smi: 81559 MiB (/work/.library/device/KINDS.md, "NVIDIA H100 80GB HBM3").
//  - H200 SXM 141GB: NVIDIA H200 datasheet (the H100's rates, 4.8 TB/s HBM3e, same links);
//    nvidia-smi: 143771 MiB ("NVIDIA H200"). /work/.library/device/H200.md also records
//    788 TFLOP/s (bf16 8192^3 GEMM) and ~4.3 TB/s (device copy) measured on one.
//  - Nodes: 8 GPUs each (DGX A100, DGX H100/H200 and HGX 8-GPU boards), with one NIC per
//    GPU in the rail-optimised fabric of NVIDIA's DGX SuperPOD reference architectures:
//    ConnectX-6 HDR 200 Gb/s = 25 GB/s per GPU (A100), ConnectX-7 NDR 400 Gb/s = 50 GB/s
//    per GPU (H100, H200), one direction.
constexpr double kMiB = 1024.0 * 1024.0;
const GpuSpec kGpus[] = {
    {"a100-40g", "NVIDIA A100 SXM 40GB", {"NVIDIA A100-SXM4-40GB"}, 40960 * kMiB, 312e12, 19.5e12, 1.555e12, 300e9,
     25e9, 8},
    {"a100-80g", "NVIDIA A100 SXM 80GB", {"NVIDIA A100-SXM4-80GB"}, 81920 * kMiB, 312e12, 19.5e12, 2.039e12, 300e9,
     25e9, 8},
    {"h100", "NVIDIA H100 SXM 80GB", {"NVIDIA H100 80GB HBM3"}, 81559 * kMiB, 989e12, 67e12, 3.35e12, 450e9, 50e9, 8},
    {"h200", "NVIDIA H200 SXM 141GB", {"NVIDIA H200"}, 143771 * kMiB, 989e12, 67e12, 4.8e12, 450e9, 50e9, 8},
};

}  // namespace

const GpuSpec* find_gpu(const std::string& name) {
  for (const GpuSpec& g : kGpus) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::string known_gpu_names() {
  std::string out;
  for (const GpuSpec& g : kGpus) out += (out.empty() ? "" : ", ") + g.name;
  return out;
}

const GpuSpec* gpu_of_device(const std::string& device) {
  std::string name = device;
  // A zdp Device's name: "cuda:0 (NVIDIA H200)".
  if (name.rfind("cuda:", 0) == 0) {
    const size_t open = name.find(" (");
    if (open != std::string::npos && name.back() == ')') name = name.substr(open + 2, name.size() - open - 3);
  }
  for (const GpuSpec& g : kGpus) {
    for (const std::string& exact : g.device_names) {
      if (name == exact) return &g;
    }
  }
  return nullptr;
}

}  // namespace zdp
