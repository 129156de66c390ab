// check_same_arithmetic (same_arithmetic.h).
#include "trainer/loop/same_arithmetic.h"

namespace zdp::trainer {

Status check_same_arithmetic(Store& store, int rank, const std::string& mine, std::chrono::milliseconds timeout) {
  constexpr char kKey[] = "zdp/deterministic/arithmetic";
  if (rank == 0) return store.set(kKey, mine);
  StatusOr<std::string> theirs = store.get(kKey, timeout);
  const std::string me = "rank " + std::to_string(rank);
  if (!theirs.ok()) return theirs.status().with_context(me + ": rank 0's GEMM libraries (train.deterministic)");
  if (*theirs == mine) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                me + " computes with " + mine + ", rank 0 with " + *theirs +
                    ": train.deterministic gives the same bits only when every rank runs the same kernels. On "
                    "CPUs, give every node one OpenBLAS core that all of them support (launch.env.OPENBLAS_CORETYPE "
                    "= \"Haswell\" for AVX2 and AVX-512 nodes together); on GPUs, one GPU model and one cuBLASLt and "
                    "cuDNN version");
}

}  // namespace zdp::trainer
