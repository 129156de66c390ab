// The Gloo communicator keeps no state for a caller's stream once its collectives are done
// (runtime/src/comm/gloo/comm_gloo.cc): nothing tells it that a stream was destroyed, and
// the reduce-scatter scratch it kept per stream stayed allocated for every engine an
// embedding program created and destroyed on one context.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

int64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? int64_t{resident} * ::sysconf(_SC_PAGESIZE) : -1;
}

// 40 streams, each running one 4 MiB reduce-scatter (2 MiB a slice): with scratch kept per
// stream the ranks ended 78 MiB more resident than after the first; pooled, 0 MiB. The streams stay alive to the end so that each has an address of its own: a
// destroyed one's address, reused by the next stream here, would find the old state (in an
// engine, other allocations take it).
TEST(GlooStreams, AStreamWhoseCollectivesAreDoneHoldsNoScratch) {
  const auto results = testing::fork_ranks(2, [](int rank, int world, Store& store) -> Status {
    std::unique_ptr<Device> device = create_cpu_device();
    CommOptions options;
    options.timeout = 60s;
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, rank, world, *device, options));
    const int64_t slice = int64_t{1} << 19;  // floats: 2 MiB
    std::vector<float> send(static_cast<size_t>(slice * world), 1.0f), recv(static_cast<size_t>(slice));
    int64_t after_first = 0;
    std::vector<std::unique_ptr<Stream>> streams;
    for (int i = 0; i < 40; ++i) {
      ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("engine " + std::to_string(i)));
      ZDP_RETURN_IF_ERROR(comm->reduce_scatter(send.data(), recv.data(), slice, DType::kF32, ReduceOp::kSum, *stream, i));
      ZDP_RETURN_IF_ERROR(stream->synchronize(60s));
      if (recv[0] != static_cast<float>(world) || recv.back() != static_cast<float>(world)) {
        return Status(StatusCode::kInternal, "reduce_scatter " + std::to_string(i) + " gave " + std::to_string(recv[0]));
      }
      if (i == 0) after_first = resident_bytes();
      streams.push_back(std::move(stream));
    }
    const int64_t grown = resident_bytes() - after_first;
    if (after_first < 0 || grown > (int64_t{40} << 20)) {
      return Status(StatusCode::kInternal, "rank " + std::to_string(rank) + ": resident memory grew by " +
                                               std::to_string(grown >> 20) + " MiB over 39 more streams");
    }
    return Status::Ok();
  });
  EXPECT_EQ(testing::describe_failures(results), "");
}

}  // namespace
}  // namespace zdp
