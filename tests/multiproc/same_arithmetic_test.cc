// check_same_arithmetic (train.deterministic) on forked ranks over a real store: a rank
// whose GEMM libraries differ from rank 0's is named on every rank, at once. Only the rank
// that differed knew before; the others went on into finalize() and waited for it there
// (the collective timeout, 60 s, without dp-launch to stop the job).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/fork_ranks.h"
#include "testing/temp_dir.h"
#include "trainer/loop/same_arithmetic.h"

namespace zdp::trainer {
namespace {

// Each rank's result of the check ("ok" or the message), with rank `odd` on other libraries.
std::vector<std::string> verdicts(int world, int odd) {
  testing::TempDir out;
  const std::string failures = testing::describe_failures(testing::fork_ranks(world, [&](int rank, int K, Store& store) {
    const std::string mine = rank == odd ? "OpenBLAS 0.3.21 (core Haswell)" : "OpenBLAS 0.3.21 (core Nehalem)";
    const Status s = check_same_arithmetic(store, rank, K, mine, std::chrono::seconds(60));
    std::ofstream(out.path() + "/" + std::to_string(rank)) << (s.ok() ? std::string("ok") : s.message());
    return Status::Ok();
  }));
  EXPECT_EQ(failures, "");
  std::vector<std::string> v;
  for (int r = 0; r < world; ++r) {
    std::ifstream in(out.path() + "/" + std::to_string(r));
    std::stringstream ss;
    ss << in.rdbuf();
    v.push_back(ss.str());
  }
  return v;
}

TEST(SameArithmetic, ARankOnOtherKernelsIsNamedOnEveryRankAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> v = verdicts(3, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "no rank waited out a timeout";
  const std::string named = "rank 2 computes with OpenBLAS 0.3.21 (core Haswell), rank 0 with OpenBLAS 0.3.21 (core Nehalem)";
  EXPECT_EQ(v[2].rfind(named, 0), 0u) << v[2];
  for (int r : {0, 1}) {
    EXPECT_EQ(v[static_cast<size_t>(r)].rfind("rank " + std::to_string(r) + ": " + named, 0), 0u) << v[static_cast<size_t>(r)];
  }
  EXPECT_NE(v[0].find("OPENBLAS_CORETYPE"), std::string::npos) << "the fix is named\n" << v[0];
  EXPECT_EQ(verdicts(3, -1), (std::vector<std::string>{"ok", "ok", "ok"}));
}

}  // namespace
}  // namespace zdp::trainer
