// Collective benchmark, nccl-tests style: for each size, zdp's communicator and the same
// operation called directly on the library underneath, side by side in one run, with the
// ratio: Gloo on CPU ranks (this file), and NCCL on GPU ranks (comm_bench_nccl.cc) when
// the machine has GPUs (counted in a forked child: this process never touches CUDA, so
// the GPU ranks it forks can).
//
//   comm_bench [--backend gloo|nccl|all] [--ranks 2,4] [--nccl-ranks N,...]
//              [--min-bytes 1M] [--max-bytes 64M] [--nccl-max-bytes 1G] [--iters 5]
//              [--warmup 1] [--rounds 3] [--ops reduce_scatter,all_gather,all_reduce]
//
// size = bytes of the whole buffer (all-reduce: the buffer; reduce-scatter: the input of
// all ranks' slices; all-gather: the output). algbw = size / time; busbw = algbw x
// 2(n-1)/n for all-reduce and x (n-1)/n for reduce-scatter and all-gather, so busbw is
// comparable across world sizes. Each measurement: untimed warm-up, timed iterations
// (rank 0's time; zdp and raw alternate for several rounds and each keeps its best), then
// one checked iteration with predictable inputs (#wrong = elements that differ from the
// closed form). Gloo: raw reduce-scatter is gloo::ReduceScatterHalvingDoubling (this Gloo
// has no other); raw all-reduce and all-gather are gloo::allreduce / gloo::allgather;
// times are the host's after a barrier. NCCL: see comm_bench_nccl.cc. The NCCL sweep runs
// from --min-bytes to --nccl-max-bytes (1 GiB); each rank uses GPU `rank`; NCCL worlds
// default to every visible GPU.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/comm_bench.h"
#include "bench/size_arg.h"
#include "runtime/internal/gloo_context.h"
#include "testing/fork_ranks.h"
#include "testing/gpu_probe.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using zdp::Status;
using zdp::StatusCode;

using zdp::bench::CollectiveShape;
using zdp::bench::CommBenchOptions;
using zdp::bench::Measurement;
using zdp::bench::collective_shape;
using zdp::bench::fill;
using zdp::bench::summed;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::vector<int> split_ints(const std::string& s) {
  std::vector<int> out;
  for (const std::string& r : split(s)) out.push_back(std::atoi(r.c_str()));
  return out;
}

bool parse(int argc, char** argv, CommBenchOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--ranks") o.ranks = split_ints(next());
    else if (a == "--nccl-ranks") o.nccl_ranks = split_ints(next());
    else if (a == "--backend") o.backends = next();
    else if (a == "--min-bytes") o.min_bytes = zdp::bench::parse_binary_size(next());
    else if (a == "--max-bytes") o.max_bytes = zdp::bench::parse_binary_size(next());
    else if (a == "--nccl-max-bytes") o.nccl_max_bytes = zdp::bench::parse_binary_size(next());
    else if (a == "--iters") o.iters = std::atoi(next().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(next().c_str());
    else if (a == "--rounds") o.rounds = std::atoi(next().c_str());
    else if (a == "--ops") o.ops = split(next());
    else {
      std::fprintf(stderr, "comm_bench: unknown argument '%s'\n", a.c_str());
      return false;
    }
  }
  for (int k : o.ranks) if (k < 1) return false;
  for (int k : o.nccl_ranks) if (k < 1) return false;
  return o.iters > 0 && o.rounds > 0 && o.warmup >= 0 && o.min_bytes > 0 && o.max_bytes >= o.min_bytes &&
         o.nccl_max_bytes >= o.min_bytes && (o.backends == "gloo" || o.backends == "nccl" || o.backends == "all");
}

// Times `iters` runs of `run` (after `warmup`), starting after a barrier.
template <typename Run, typename Barrier>
double time_us(const CommBenchOptions& o, Run&& run, Barrier&& barrier) {
  for (int i = 0; i < o.warmup; ++i) run();
  barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < o.iters; ++i) run();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.iters;
}

template <typename ZRun, typename ZBarrier, typename RRun, typename RBarrier>
void time_gloo(const CommBenchOptions& o, ZRun&& zrun, ZBarrier&& zbar, RRun&& rrun, RBarrier&& rbar, Measurement& z,
               Measurement& r) {
  zdp::bench::time_side_by_side(o, [&] { return time_us(o, zrun, zbar); }, [&] { return time_us(o, rrun, rbar); }, z, r);
}

Status gloo_bench_rank(const CommBenchOptions& o, int rank, int world, zdp::Store& store) {
  auto device = zdp::create_cpu_device();
  ZDP_ASSIGN_OR_RETURN(auto stream, device->create_stream("comm"));
  zdp::CommOptions copts;
  ZDP_ASSIGN_OR_RETURN(auto comm, zdp::create_gloo_communicator(store, rank, world, *device, copts));
  ZDP_ASSIGN_OR_RETURN(auto raw, zdp::connect_gloo_context(store, "raw-gloo", rank, world, copts));

  auto zdp_sync = [&] { stream->synchronize(600s).throw_if_error(); };
  auto raw_barrier = [&] {
    gloo::BarrierOptions b(raw);
    gloo::barrier(b);
  };
  auto zdp_barrier = [&] {
    comm->barrier(*stream).throw_if_error();
    zdp_sync();
  };

  if (rank == 0) zdp::bench::print_header("gloo over loopback", world, o);

  for (const std::string& op : o.ops) {
    for (int64_t size = o.min_bytes; size <= o.max_bytes; size *= 2) {
      const int64_t total = size / 4;               // elements in the whole buffer
      const CollectiveShape shape = collective_shape(op, total, world);
      const int64_t slice = shape.slice;            // reduce-scatter output / all-gather input
      if (slice == 0) continue;
      Measurement z, r;
      if (op == "all_reduce") {
        std::vector<float> in(static_cast<size_t>(total)), out(in.size()), rin(in.size()), rout(in.size());
        fill(in, rank);
        fill(rin, rank);
        auto zrun = [&] { comm->all_reduce(in.data(), out.data(), total, zdp::DType::kF32, zdp::ReduceOp::kSum, *stream).throw_if_error(); };
        auto rrun = [&] {
          gloo::AllreduceOptions a(raw);
          a.setInput(rin.data(), rin.size());
          a.setOutput(rout.data(), rout.size());
          a.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          gloo::allreduce(a);
        };
        time_gloo(o, [&] { zrun(); zdp_sync(); }, zdp_barrier, rrun, raw_barrier, z, r);
        zrun(); zdp_sync(); rrun();
        for (int64_t i = 0; i < total; ++i) {
          z.wrong += out[static_cast<size_t>(i)] != summed(world, i);
          r.wrong += rout[static_cast<size_t>(i)] != summed(world, i);
        }
      } else if (op == "reduce_scatter") {
        std::vector<float> in(static_cast<size_t>(slice * world)), out(static_cast<size_t>(slice)), rbuf(in.size());
        fill(in, rank);
        const std::vector<int> recv_elems(static_cast<size_t>(world), static_cast<int>(slice));
        // The algorithm object binds its buffer once (its intended use); not timed.
        gloo::ReduceScatterHalvingDoubling<float> hd(raw, {rbuf.data()}, static_cast<int>(rbuf.size()), recv_elems);
        auto zrun = [&] { comm->reduce_scatter(in.data(), out.data(), slice, zdp::DType::kF32, zdp::ReduceOp::kSum, *stream).throw_if_error(); };
        time_gloo(o, [&] { zrun(); zdp_sync(); }, zdp_barrier, [&] { hd.run(); }, raw_barrier, z, r);
        fill(rbuf, rank);
        zrun(); zdp_sync(); hd.run();
        // Halving-doubling leaves rank r's reduced slice at the bit-reversed position of r
        // for a power-of-two world, which is where we check it. At other world sizes this
        // Gloo spreads the sums over other ranks' buffers (at 3 ranks rank 2 holds none):
        // its column is timed, not checked ("n/a"); zdp's ring is checked at every size.
        const bool power_of_two = (world & (world - 1)) == 0;
        r.checked = power_of_two;
        int64_t hd_slice = 0;
        for (int b = 1, rr = rank; b < world; b <<= 1, rr >>= 1) hd_slice = (hd_slice << 1) | (rr & 1);
        for (int64_t i = 0; i < slice; ++i) {
          const float want = summed(world, rank * slice + i);
          z.wrong += out[static_cast<size_t>(i)] != want;
          if (power_of_two) r.wrong += rbuf[static_cast<size_t>(hd_slice * slice + i)] != summed(world, hd_slice * slice + i);
        }
      } else if (op == "all_gather") {
        std::vector<float> in(static_cast<size_t>(slice)), out(static_cast<size_t>(slice * world)), rout(out.size());
        fill(in, 0, rank * slice);
        auto zrun = [&] { comm->all_gather(in.data(), out.data(), slice, zdp::DType::kF32, *stream).throw_if_error(); };
        auto rrun = [&] {
          gloo::AllgatherOptions a(raw);
          a.setInput(in.data(), in.size());
          a.setOutput(rout.data(), rout.size());
          gloo::allgather(a);
        };
        time_gloo(o, [&] { zrun(); zdp_sync(); }, zdp_barrier, rrun, raw_barrier, z, r);
        std::fill(out.begin(), out.end(), -1.0f);
        std::fill(rout.begin(), rout.end(), -1.0f);
        zrun(); zdp_sync(); rrun();
        for (int64_t i = 0; i < slice * world; ++i) {
          const float want = static_cast<float>(i % 5 + 1);
          z.wrong += out[static_cast<size_t>(i)] != want;
          r.wrong += rout[static_cast<size_t>(i)] != want;
        }
      } else {
        return Status(StatusCode::kInvalidArgument, "unknown op '" + op + "'");
      }
      if (rank == 0) zdp::bench::print_row(size, total, op, world, z, r);
      ZDP_RETURN_IF_ERROR(zdp::bench::wrong_results(op, size, z, r));
    }
  }
  return Status::Ok();
}

// Runs every world of one backend; returns the number of worlds that failed.
int run_worlds(const char* backend, const std::vector<int>& worlds,
               const std::function<Status(int, int, zdp::Store&)>& body) {
  int failures = 0;
  for (int k : worlds) {
    zdp::testing::ForkOptions fopts;
    fopts.deadline = std::chrono::minutes(20);
    const std::string failed = zdp::testing::describe_failures(zdp::testing::fork_ranks(k, body, fopts));
    if (!failed.empty()) {
      std::fprintf(stderr, "comm_bench: %s, %d ranks failed:\n%s", backend, k, failed.c_str());
      ++failures;
    }
    std::printf("\n");
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  CommBenchOptions o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: comm_bench [--backend gloo|nccl|all] [--ranks 2,4] [--nccl-ranks N,...] [--min-bytes 1M] "
                 "[--max-bytes 64M] [--nccl-max-bytes 1G] [--iters N] [--warmup N] [--rounds N] "
                 "[--ops reduce_scatter,all_gather,all_reduce]\n");
    return 2;
  }
  int failures = 0;
  if (o.backends != "nccl") {
    failures += run_worlds("gloo", o.ranks, [&](int rank, int world, zdp::Store& store) {
      return gloo_bench_rank(o, rank, world, store);
    });
  }
  if (o.backends != "gloo") {
    const int gpus = zdp::testing::cuda_devices_without_init();
    std::vector<int> worlds = o.nccl_ranks;
    if (worlds.empty() && gpus > 0) worlds = {gpus};
    worlds.erase(std::remove_if(worlds.begin(), worlds.end(), [&](int k) { return k > gpus; }), worlds.end());
    if (worlds.empty()) {
      std::printf("# comm_bench: nccl skipped: %d CUDA device(s) visible\n", gpus);
      if (o.backends == "nccl") ++failures;
    } else {
      failures += run_worlds("nccl", worlds, [&](int rank, int world, zdp::Store& store) {
        return zdp::bench::nccl_bench_rank(o, rank, world, store);
      });
    }
  }
  return failures == 0 ? 0 : 1;
}
