// The GPUs zdp knows by their datasheets: what dp-launch plan --gpu plans for, what a
// profile's device is matched to (plan --from-profile), and the peak that MFU is a
// fraction of in dp-train's step lines. A device is known only by its exact CUDA name
// (cudaDeviceProp::name): "NVIDIA H100 PCIe" or "NVIDIA A100-SXM4-40GB" has other rates
// and memory than the SXM part of its family, and planning it as that part was wrong.
#pragma once

#include <string>
#include <vector>

namespace zdp {

struct GpuSpec {
  std::string name;                       // "h200": what --gpu takes
  std::string description;                // "NVIDIA H200 SXM 141GB"
  std::vector<std::string> device_names;  // the exact CUDA names of this part
  double memory_bytes = 0;                // as nvidia-smi reports the total (MiB x 2^20)
  double bf16_flops = 0;                  // dense tensor-core peak (fp16 the same on these parts)
  double fp32_flops = 0;                  // plain fp32 (no TF32)
  double hbm_bytes_per_s = 0;
  double nvlink_bytes_per_s = 0;     // per GPU, one direction, inside a node
  double internode_bytes_per_s = 0;  // per GPU, one direction (its NIC)
  int gpus_per_node = 8;             // the DGX/HGX node's: what --gpus-per-node defaults to
};

// The table (sources in gpu_datasheets.cc). Null for a name not in it.
const GpuSpec* find_gpu(const std::string& name);
// "a100-40g, a100-80g, h100, h200": for error messages and --help.
std::string known_gpu_names();
// The part whose exact CUDA name is `device` (or appears as "cuda:N (<name>)", a zdp
// Device's name()); null for any other device.
const GpuSpec* gpu_of_device(const std::string& device);

}  // namespace zdp
