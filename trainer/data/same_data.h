// Every rank trains on the same dataset: token files are found by each rank on its own
// (data.path may be a glob, matched on each node's disk), so a node missing a shard, or
// holding other ones, would otherwise sample another dataset without a word.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::trainer {

// Rank 0 publishes what it sees (the training and held-out sets' sample counts; -1 for
// none) through the job's store; every other rank compares its own with it. Errors on
// the rank that differs, naming both counts and `what` (the config keys): "rank 2 sees
// 900 training samples (data.path = "d/*.bin"), rank 0 sees 1000 ...". O(1) store
// requests a rank. REQUIRES: every rank calls it, with the same `key`.
Status check_same_data(Store& store, int rank, int64_t train_samples, int64_t val_samples, const std::string& what,
                       std::chrono::milliseconds timeout, const std::string& key = "zdp/data/samples");

}  // namespace zdp::trainer
