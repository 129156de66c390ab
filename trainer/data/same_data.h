// Every rank trains on the same dataset: token files are found by each rank on its own
// (data.path may be a glob, matched on each node's disk), so a node missing a shard, or
// holding other ones, would otherwise sample another dataset without a word.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "trainer/data/source.h"
#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::trainer {

// What a rank sees of one split: its sample count and DataSource::fingerprint() (a
// sampled digest of a token file's contents). samples = -1 for no such split.
struct DataIdentity {
  int64_t samples = -1;
  std::string fingerprint;
  static DataIdentity of(const DataSource* source);
};

// Rank 0 publishes what it sees of the training and held-out sets through the job's
// store; every other rank compares its own with it. Errors on the rank that differs,
// naming both counts, or both digests when only the contents differ, and `what` (the
// config keys): "rank 2 sees 900 training samples (data.path = "d/*.bin"), rank 0 sees
// 1000 ...". O(1) store requests a rank. REQUIRES: every rank calls it, with the same `key`.
Status check_same_data(Store& store, int rank, const DataIdentity& train, const DataIdentity& val,
                       const std::string& what, std::chrono::milliseconds timeout,
                       const std::string& key = "zdp/data/samples");

// What a rank that could not open its data calls instead (returns `failure`): rank 0
// publishes it under `key`, so that the others, waiting there in check_same_data, stop at
// once with kAborted naming rank 0's error instead of waiting out `timeout` and blaming a
// timeout of "rank 0's data sizes".
Status share_data_failure(Store& store, int rank, const Status& failure, const std::string& key = "zdp/data/samples");

}  // namespace zdp::trainer
