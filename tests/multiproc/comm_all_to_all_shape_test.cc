// Communicator::all_to_all with an AllToAllShape (Gloo, CPU, K = 4 real processes): each
// chunk trimmed to its peer's count (zero moves nothing, and what is not received keeps
// its bytes), one shared chunk sent to every peer, and shapes that cannot be refused
// before anything moves.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

constexpr int kWorld = 4;
constexpr int64_t kCount = 8;  // elements between chunks
constexpr float kUntouched = -1.0f;

// What rank r sends rank q in element i of its chunk, and how many elements travel
// between r and q (symmetric: 8 to the partner in the same pair {0,1}, {2,3}, 3 across,
// none between 0 and 3).
float value(int r, int q, int64_t i) { return static_cast<float>(100 * r + 10 * q + i); }
int64_t count_between(int r, int q) {
  if ((r ^ q) == 3) return 0;
  return r / 2 == q / 2 ? kCount : 3;
}

StatusOr<std::unique_ptr<Communicator>> make_comm(int rank, Store& store, Device& device) {
  CommOptions options;
  options.timeout = 60s;
  return create_gloo_communicator(store, rank, kWorld, device, options);
}

Status check(const std::vector<float>& out, int rank, bool shared) {
  for (int q = 0; q < kWorld; ++q) {
    const int64_t n = count_between(rank, q);
    for (int64_t i = 0; i < kCount; ++i) {
      const float want = i < n ? value(q, shared ? 0 : rank, i) : kUntouched;
      const float got = out[static_cast<size_t>(q * kCount + i)];
      if (got != want) {
        return Status(StatusCode::kInternal, "rank " + std::to_string(rank) + (shared ? " shared" : "") +
                                                 ": chunk from " + std::to_string(q) + " element " + std::to_string(i) +
                                                 " is " + std::to_string(got) + ", want " + std::to_string(want));
      }
    }
  }
  return Status::Ok();
}

TEST(AllToAllShape, TrimsEachChunkToItsPeersCount) {
  const auto body = [](int rank, int, Store& store) -> Status {
    std::unique_ptr<Device> device = create_cpu_device();
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("comm"));
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, make_comm(rank, store, *device));
    AllToAllShape shape;
    for (int q = 0; q < kWorld; ++q) shape.counts.push_back(count_between(rank, q));
    // Per-peer chunks.
    std::vector<float> in(kWorld * kCount), out(kWorld * kCount, kUntouched);
    for (int q = 0; q < kWorld; ++q) {
      for (int64_t i = 0; i < kCount; ++i) in[static_cast<size_t>(q * kCount + i)] = value(rank, q, i);
    }
    ZDP_RETURN_IF_ERROR(comm->all_to_all(in.data(), out.data(), kCount, DType::kF32, shape, *stream, 1));
    ZDP_RETURN_IF_ERROR(stream->synchronize(60s));
    ZDP_RETURN_IF_ERROR(check(out, rank, false));
    // One shared chunk (what rank r would send rank 0) for every peer.
    shape.send_shared = true;
    std::vector<float> one(in.begin(), in.begin() + kCount), gathered(kWorld * kCount, kUntouched);
    ZDP_RETURN_IF_ERROR(comm->all_to_all(one.data(), gathered.data(), kCount, DType::kF32, shape, *stream, 2));
    ZDP_RETURN_IF_ERROR(stream->synchronize(60s));
    ZDP_RETURN_IF_ERROR(check(gathered, rank, true));
    // Refused before anything moves (every rank alike): a count per peer, each within `count`.
    AllToAllShape bad;
    bad.counts = {1, 2};
    Status s = comm->all_to_all(in.data(), out.data(), kCount, DType::kF32, bad, *stream);
    if (s.ok() || s.message().find("2 per-peer counts for a world of 4") == std::string::npos) {
      return Status(StatusCode::kInternal, "short shape: " + s.to_string());
    }
    bad.counts = {0, 0, kCount + 1, 0};
    s = comm->all_to_all(in.data(), out.data(), kCount, DType::kF32, bad, *stream);
    if (s.ok() || s.message().find("peer 2's count 9 is not in [0, 8]") == std::string::npos) {
      return Status(StatusCode::kInternal, "oversized count: " + s.to_string());
    }
    return Status::Ok();
  };
  EXPECT_EQ(testing::describe_failures(testing::fork_ranks(kWorld, body)), "");
}

}  // namespace
}  // namespace zdp
