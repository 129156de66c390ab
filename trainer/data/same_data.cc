// check_same_data (same_data.h).
#include "trainer/data/same_data.h"

#include <cstdio>

namespace zdp::trainer {

Status check_same_data(Store& store, int rank, int64_t train_samples, int64_t val_samples, const std::string& what,
                       std::chrono::milliseconds timeout, const std::string& key) {
  const std::string mine = std::to_string(train_samples) + " " + std::to_string(val_samples);
  if (rank == 0) return store.set(key, mine);
  StatusOr<std::string> theirs = store.get(key, timeout);
  if (!theirs.ok()) return theirs.status().with_context("rank " + std::to_string(rank) + ": rank 0's data sizes");
  if (*theirs == mine) return Status::Ok();
  long long train0 = -1, val0 = -1;
  if (std::sscanf(theirs->c_str(), "%lld %lld", &train0, &val0) != 2) {
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(rank) + ": rank 0's data sizes '" + *theirs +
                                                    "' are not two numbers");
  }
  auto sets = [](long long train, long long val) {
    return std::to_string(train) + " training samples and " +
           (val < 0 ? std::string("no held-out set") : std::to_string(val) + " held-out samples");
  };
  return Status(StatusCode::kInvalidArgument,
                "rank " + std::to_string(rank) + " sees " + sets(train_samples, val_samples) + ", rank 0 sees " +
                    sets(train0, val0) + " (" + what +
                    "): every rank must read the same data; a glob matched different files on their nodes, or a "
                    "node's copy differs");
}

}  // namespace zdp::trainer
