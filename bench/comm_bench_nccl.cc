// comm_bench's NCCL half: zdp's NCCL communicator against the same collective called
// directly on a raw NCCL communicator, one GPU per rank (rank r on GPU r), side by side.
// Both run on their own stream with device buffers; each timed round is CUDA events
// around --iters back-to-back calls after --warmup untimed ones and a barrier (a tiny
// all-reduce), so a host that cannot issue the calls fast enough shows as GPU idle time.
// "host us" is the host's time per call while issuing (zdp: argument and pointer checks,
// the watchdog's event; raw: NCCL's own enqueue): the per-call overhead at small sizes.
// Sizes as nccl-tests (fp32; --min-bytes to --nccl-max-bytes); the checked iteration uses
// comm_bench.h's closed-form inputs.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "bench/comm_bench.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp::bench {
namespace {

using namespace std::chrono_literals;

#define BENCH_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) return Status(StatusCode::kCudaError, std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)
#define BENCH_NCCL(call)                                                                          \
  do {                                                                                            \
    const ncclResult_t r_ = (call);                                                               \
    if (r_ != ncclSuccess) return Status(StatusCode::kNcclError, std::string(#call) + ": " + ncclGetErrorString(r_)); \
  } while (0)

// One timed round on `stream`: warm-up, a barrier, then `iters` calls between two events.
// Returns microseconds per call; *host_us the host's issuing time per call.
template <typename Call, typename Barrier>
StatusOr<double> time_round(const CommBenchOptions& o, cudaStream_t stream, Call&& call, Barrier&& barrier,
                            double* host_us) {
  cudaEvent_t start = nullptr, stop = nullptr;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < o.warmup; ++i) ZDP_RETURN_IF_ERROR(call());
  ZDP_RETURN_IF_ERROR(barrier());
  BENCH_CUDA(cudaEventRecord(start, stream));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) ZDP_RETURN_IF_ERROR(call());
  *host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
  BENCH_CUDA(cudaEventRecord(stop, stream));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return static_cast<double>(ms) * 1e3 / o.iters;
}

}  // namespace

Status nccl_bench_rank(const CommBenchOptions& o, int rank, int world, Store& store) {
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, create_cuda_device(rank));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> zstream, device->create_stream("comm", StreamPriority::kHigh));
  CommOptions copts;
  copts.timeout = 600s;
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_nccl_communicator(store, rank, world, *device, copts));
  const auto zs = static_cast<cudaStream_t>(zstream->native_handle());

  // The raw communicator: its own unique id through the store, blocking, as NCCL's default.
  ncclUniqueId id;
  if (rank == 0) {
    BENCH_NCCL(ncclGetUniqueId(&id));
    ZDP_RETURN_IF_ERROR(store.set("raw-nccl-id", std::string(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    ZDP_ASSIGN_OR_RETURN(std::string v, store.get("raw-nccl-id", copts.timeout));
    if (v.size() != sizeof(id)) return Status(StatusCode::kInternal, "raw-nccl-id: wrong size");
    std::memcpy(&id, v.data(), sizeof(id));
  }
  ncclComm_t raw = nullptr;
  BENCH_NCCL(ncclCommInitRank(&raw, world, id, rank));
  cudaStream_t rs = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer flag, device->allocate(sizeof(float), MemCategory::kOther));

  auto zdp_barrier = [&]() -> Status {
    ZDP_RETURN_IF_ERROR(comm->barrier(*zstream));
    return zstream->synchronize(copts.timeout);
  };
  auto raw_barrier = [&]() -> Status {
    BENCH_NCCL(ncclAllReduce(flag.data(), flag.data(), 1, ncclFloat32, ncclSum, raw, rs));
    BENCH_CUDA(cudaStreamSynchronize(rs));
    return Status::Ok();
  };
  if (rank == 0) print_header("nccl, one GPU per rank", world, o);

  Status outcome;
  for (const std::string& op : o.ops) {
    for (int64_t size = o.min_bytes; size <= o.nccl_max_bytes && outcome.ok(); size *= 2) {
      const int64_t total = size / 4;
      const CollectiveShape shape = collective_shape(op, total, world);
      const int64_t slice = shape.slice, in_elems = shape.in, out_elems = shape.out;
      if (slice == 0) continue;
      const bool gather = op == "all_gather", scatter = op == "reduce_scatter";
      if (!gather && !scatter && op != "all_reduce") return Status(StatusCode::kInvalidArgument, "unknown op '" + op + "'");
      ZDP_ASSIGN_OR_RETURN(DeviceBuffer zin, device->allocate(in_elems * 4, MemCategory::kOther));
      ZDP_ASSIGN_OR_RETURN(DeviceBuffer zout, device->allocate(out_elems * 4, MemCategory::kOther));
      ZDP_ASSIGN_OR_RETURN(DeviceBuffer rin, device->allocate(in_elems * 4, MemCategory::kOther));
      ZDP_ASSIGN_OR_RETURN(DeviceBuffer rout, device->allocate(out_elems * 4, MemCategory::kOther));
      std::vector<float> host_in(static_cast<size_t>(in_elems));
      if (gather) fill(host_in, 0, rank * slice);
      else fill(host_in, rank);
      ZDP_RETURN_IF_ERROR(device->memcpy(zin.data(), host_in.data(), host_in.size() * 4));
      ZDP_RETURN_IF_ERROR(device->memcpy(rin.data(), host_in.data(), host_in.size() * 4));

      auto zcall = [&]() -> Status {
        if (gather) return comm->all_gather(zin.data(), zout.data(), slice, DType::kF32, *zstream);
        if (scatter) return comm->reduce_scatter(zin.data(), zout.data(), slice, DType::kF32, ReduceOp::kSum, *zstream);
        return comm->all_reduce(zin.data(), zout.data(), total, DType::kF32, ReduceOp::kSum, *zstream);
      };
      auto rcall = [&]() -> Status {
        if (gather) BENCH_NCCL(ncclAllGather(rin.data(), rout.data(), slice, ncclFloat32, raw, rs));
        else if (scatter) BENCH_NCCL(ncclReduceScatter(rin.data(), rout.data(), slice, ncclFloat32, ncclSum, raw, rs));
        else BENCH_NCCL(ncclAllReduce(rin.data(), rout.data(), total, ncclFloat32, ncclSum, raw, rs));
        return Status::Ok();
      };
      Measurement z, r;
      Status timed;
      time_side_by_side(
          o,
          [&] {
            double host = 0;
            StatusOr<double> us = time_round(o, zs, zcall, zdp_barrier, &host);
            if (!us.ok()) timed = us.status();
            z.host_us = host;
            return us.ok() ? *us : 1e300;
          },
          [&] {
            double host = 0;
            StatusOr<double> us = time_round(o, rs, rcall, raw_barrier, &host);
            if (!us.ok()) timed = us.status();
            r.host_us = host;
            return us.ok() ? *us : 1e300;
          },
          z, r);
      ZDP_RETURN_IF_ERROR(timed);
      // The checked iteration: outputs poisoned, one call each, compared with the closed form.
      std::vector<float> poison(static_cast<size_t>(out_elems), -1.0f), zhost(poison.size()), rhost(poison.size());
      ZDP_RETURN_IF_ERROR(device->memcpy(zout.data(), poison.data(), poison.size() * 4));
      ZDP_RETURN_IF_ERROR(device->memcpy(rout.data(), poison.data(), poison.size() * 4));
      ZDP_RETURN_IF_ERROR(zcall());
      ZDP_RETURN_IF_ERROR(rcall());
      ZDP_RETURN_IF_ERROR(zstream->synchronize(copts.timeout));
      BENCH_CUDA(cudaStreamSynchronize(rs));
      ZDP_RETURN_IF_ERROR(device->memcpy(zhost.data(), zout.data(), zhost.size() * 4));
      ZDP_RETURN_IF_ERROR(device->memcpy(rhost.data(), rout.data(), rhost.size() * 4));
      for (int64_t i = 0; i < out_elems; ++i) {
        const float want = gather ? static_cast<float>(i % 5 + 1) : summed(world, (scatter ? rank * slice : 0) + i);
        z.wrong += zhost[static_cast<size_t>(i)] != want;
        r.wrong += rhost[static_cast<size_t>(i)] != want;
      }
      if (rank == 0) {
        print_row(size, total, op, world, z, r);
        std::printf("#%10s %11s %-15s | host us per call: zdp %.2f, raw %.2f\n", "", "", "", z.host_us, r.host_us);
      }
      outcome = wrong_results(op, size, z, r);
    }
  }
  comm.reset();
  (void)ncclCommDestroy(raw);
  (void)cudaStreamDestroy(rs);
  return outcome;
}

}  // namespace zdp::bench
