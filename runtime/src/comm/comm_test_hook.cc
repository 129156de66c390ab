// $ZDP_TEST_COMM (comm_test_hook.h).
#include "runtime/src/comm/comm_test_hook.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <set>
#include <thread>

#include "core/internal/key_value_list.h"

namespace zdp::detail {

StatusOr<TestHook> parse_test_hook(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  "ZDP_TEST_COMM=\"" + text + "\": " + why +
                      " (expected rank=R,seq=N,desync=op|reduce|count|dtype|tag|order or "
                      "rank=R,seq=N,action=stop|kill|slow|drop[,ms=M])");
  };
  static const std::set<std::string> kDesyncs = {"op", "reduce", "count", "dtype", "tag", "order"};
  static const std::set<std::string> kActions = {"stop", "kill", "slow", "drop"};
  TestHook hook;
  StatusOr<std::vector<KeyValue>> items = split_key_values(text);
  if (!items.ok()) return bad(items.status().message());
  bool has_rank = false, has_seq = false;
  for (const KeyValue& item : *items) {
    const std::string& key = item.key;
    if (key == "desync" || key == "action") {
      if (!(key == "desync" ? kDesyncs : kActions).count(item.value)) {
        return bad("unknown " + key + " '" + item.value + "'");
      }
      (key == "desync" ? hook.desync : hook.action) = item.value;
      continue;
    }
    const int64_t max = key == "rank" ? INT32_MAX : key == "seq" ? INT64_MAX : key == "ms" ? kMaxHookPauseMs : -1;
    if (max < 0) return bad("unknown field '" + key + "'");
    const StatusOr<int64_t> v = integer_value(item, 0, max);
    if (!v.ok()) return bad(v.status().message());
    if (key == "rank") {
      hook.rank = static_cast<int>(*v);
      has_rank = true;
    } else if (key == "seq") {
      hook.seq = static_cast<uint64_t>(*v);
      has_seq = true;
    } else {
      hook.ms = *v;
    }
  }
  if (!has_rank || !has_seq) return bad("rank and seq are required");
  if (hook.desync.empty() == hook.action.empty()) return bad("give one of desync and action");
  return hook;
}

bool apply_desync(const TestHook& hook, int rank, CollectiveDesc& desc) {
  if (rank != hook.rank || hook.desync.empty() || hook.desync == "order" || desc.seq != hook.seq) return false;
  if (hook.desync == "op") {
    desc.op = CollectiveOp::kBarrier;  // touches no buffer
  } else if (hook.desync == "reduce") {
    desc.reduce = desc.reduce == ReduceOp::kSum ? ReduceOp::kMax : ReduceOp::kSum;
  } else if (hook.desync == "count") {
    if (desc.count > 0) --desc.count;
  } else if (hook.desync == "dtype") {
    if (desc.dtype == DType::kF32) {
      desc.dtype = DType::kBF16;
      desc.count *= 2;
    } else if (desc.count > 0) {
      --desc.count;
    }
  } else if (hook.desync == "tag") {
    desc.tag += 1000;
  }
  return true;
}

void run_action(const TestHook& hook, int rank, const CollectiveDesc& desc, Communicator& comm) {
  if (rank != hook.rank || hook.action.empty() || desc.seq != hook.seq) return;
  std::fprintf(stderr, "rank %d: ZDP_TEST_COMM: %s at %s\n", rank, hook.action.c_str(), desc.describe().c_str());
  std::fflush(stderr);
  if (hook.action == "stop") {
    ::raise(SIGSTOP);
  } else if (hook.action == "kill") {
    ::raise(SIGKILL);
  } else if (hook.action == "slow") {
    std::this_thread::sleep_for(std::chrono::milliseconds(hook.ms));
  } else if (hook.action == "drop") {
    comm.abort("ZDP_TEST_COMM: this rank's connections were dropped");
  }
}

}  // namespace zdp::detail
