// check_same_data (same_data.h).
#include "trainer/data/same_data.h"

#include <sstream>

#include "core/internal/sha256.h"

namespace zdp::trainer {
namespace {

// A fingerprint as one word for the store's value (a synthetic one is a sentence).
std::string digest_word(const std::string& fingerprint) {
  Sha256 digest;
  digest.update(fingerprint.data(), fingerprint.size());
  return digest.finish_hex().substr(0, 16);
}

std::string sets(int64_t train, int64_t val) {
  return std::to_string(train) + " training samples and " +
         (val < 0 ? std::string("no held-out set") : std::to_string(val) + " held-out samples");
}

constexpr char kFailed[] = "failed: ";  // rank 0's value when its data did not open

}  // namespace

Status share_data_failure(Store& store, int rank, const Status& failure, const std::string& key) {
  if (rank == 0) {
    const Status shared = store.set(key, kFailed + failure.to_string());
    if (!shared.ok()) return failure.with_context("(not shared with the other ranks: " + shared.message() + ")");
  }
  return failure;
}

DataIdentity DataIdentity::of(const DataSource* source) {
  if (source == nullptr) return {};
  return {source->size(), source->fingerprint()};
}

Status check_same_data(Store& store, int rank, const DataIdentity& train, const DataIdentity& val,
                       const std::string& what, std::chrono::milliseconds timeout, const std::string& key) {
  const std::string train_digest = digest_word(train.fingerprint), val_digest = digest_word(val.fingerprint);
  const std::string mine =
      std::to_string(train.samples) + " " + std::to_string(val.samples) + " " + train_digest + " " + val_digest;
  if (rank == 0) return store.set(key, mine);
  StatusOr<std::string> theirs = store.get(key, timeout);
  if (!theirs.ok()) return theirs.status().with_context("rank " + std::to_string(rank) + ": rank 0's data sizes");
  if (*theirs == mine) return Status::Ok();
  if (theirs->rfind(kFailed, 0) == 0) {
    return Status(StatusCode::kAborted, "rank " + std::to_string(rank) + ": rank 0 could not open its data: " +
                                            theirs->substr(sizeof(kFailed) - 1));
  }
  std::istringstream in(*theirs);
  long long train0 = -1, val0 = -1;
  std::string train_digest0, val_digest0, extra;
  if (!(in >> train0 >> val0 >> train_digest0 >> val_digest0) || (in >> extra)) {
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(rank) + ": rank 0's data sizes '" + *theirs +
                                                    "' are not two numbers and two digests");
  }
  const std::string why = " (" + what + "): every rank must read the same data; a glob matched different files on "
                                        "their nodes, or a node's copy differs";
  const std::string me = "rank " + std::to_string(rank);
  if (train0 != train.samples || val0 != val.samples) {
    return Status(StatusCode::kInvalidArgument,
                  me + " sees " + sets(train.samples, val.samples) + ", rank 0 sees " + sets(train0, val0) + why);
  }
  const bool train_differs = train_digest0 != train_digest;
  return Status(StatusCode::kInvalidArgument,
                me + "'s " + (train_differs ? "training" : "held-out") + " data has as many samples as rank 0's (" +
                    std::to_string(train_differs ? train.samples : val.samples) +
                    ") but other contents (sampled digest " + (train_differs ? train_digest : val_digest) +
                    ", rank 0's " + (train_differs ? train_digest0 : val_digest0) + ")" + why);
}

}  // namespace zdp::trainer
