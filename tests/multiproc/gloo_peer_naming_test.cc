// A survivor's Gloo error names the dead peer's rank (runtime/src/comm/gloo/
// gloo_peer_ranks.h), not only the address Gloo prints. Best effort: in about 1 run of 100
// at 3 ranks Gloo prints an address neither end published (not understood; the error then
// says "a peer died or its connection broke", as before), so the rank must be named in
// most of several 2-rank kills, not in every one.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

TEST(GlooPeerNaming, AKilledPeerIsNamedByItsRank) {
  constexpr int kTrials = 5;
  int named = 0;
  std::string unnamed;
  for (int trial = 0; trial < kTrials; ++trial) {
    const auto results = testing::fork_ranks(2, [](int rank, int world, Store& store) -> Status {
      std::unique_ptr<Device> device = create_cpu_device();
      ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("comm"));
      CommOptions options;
      options.timeout = 20s;
      ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                           create_gloo_communicator(store, rank, world, *device, options));
      std::vector<float> warm(64, 1.0f);
      ZDP_RETURN_IF_ERROR(comm->all_reduce(warm.data(), warm.data(), 64, DType::kF32, ReduceOp::kSum, *stream));
      ZDP_RETURN_IF_ERROR(stream->synchronize(30s));
      if (rank == 1) ::raise(SIGKILL);
      std::vector<float> buf(4096, 1.0f);
      ZDP_RETURN_IF_ERROR(comm->all_reduce(buf.data(), buf.data(), 4096, DType::kF32, ReduceOp::kSum, *stream));
      const Status s = stream->synchronize(60s);
      if (s.code() != StatusCode::kPeerFailure) return Status(StatusCode::kInternal, "got " + s.to_string());
      // Rank 0's verdict travels back as its exit: OK when named, kNotFound when not.
      return s.message().find("the connection to rank 1 broke") != std::string::npos
                 ? Status::Ok()
                 : Status(StatusCode::kNotFound, s.message());
    });
    ASSERT_EQ(results[1].signal, SIGKILL);
    if (results[0].ok()) {
      ++named;
    } else {
      unnamed += results[0].describe() + "\n";
    }
  }
  EXPECT_GE(named, kTrials - 1) << "named in " << named << " of " << kTrials << ":\n" << unnamed;
}

}  // namespace
}  // namespace zdp
