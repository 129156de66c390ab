// comm_bench's NCCL half in builds without NCCL: says so.
#include "bench/comm_bench.h"

namespace zdp::bench {

Status nccl_bench_rank(const CommBenchOptions&, int, int, Store&) {
  return Status(StatusCode::kUnavailable, "comm_bench: this build has no NCCL (configure with CUDA and NCCL found)");
}

}  // namespace zdp::bench
