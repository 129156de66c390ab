// check_same_arithmetic (same_arithmetic.h).
#include "trainer/loop/same_arithmetic.h"

namespace zdp::trainer {

Status check_same_arithmetic(Store& store, int rank, int world_size, const std::string& mine,
                             std::chrono::milliseconds timeout) {
  constexpr char kKey[] = "zdp/deterministic/arithmetic", kDiffers[] = "zdp/deterministic/differs",
                 kChecked[] = "zdp/deterministic/checked", kDone[] = "zdp/deterministic/done";
  const std::string me = "rank " + std::to_string(rank);
  if (rank == 0) {
    ZDP_RETURN_IF_ERROR(store.set(kKey, mine));
  } else {
    StatusOr<std::string> theirs = store.get(kKey, timeout);
    if (!theirs.ok()) return theirs.status().with_context(me + ": rank 0's GEMM libraries (train.deterministic)");
    if (*theirs != mine) {
      ZDP_RETURN_IF_ERROR(store.set(
          kDiffers, me + " computes with " + mine + ", rank 0 with " + *theirs +
                        ": train.deterministic gives the same bits only when every rank runs the same kernels. On "
                        "CPUs, give every node one OpenBLAS core that all of them support (launch.env.OPENBLAS_CORETYPE "
                        "= \"Haswell\" for AVX2 and AVX-512 nodes together); on GPUs, one GPU model and one cuBLASLt "
                        "and cuDNN version"));
    }
  }
  // Every rank learns the verdict: the last to compare opens the gate. Only the rank that
  // differed knew before, and the others went on to wait for it in finalize() (the
  // collective timeout without dp-launch, which stops the job at once).
  ZDP_ASSIGN_OR_RETURN(const int64_t checked, store.add(kChecked, 1));
  if (checked == world_size) ZDP_RETURN_IF_ERROR(store.set(kDone, "1"));
  const Status gate = store.wait({kDone}, timeout);
  if (!gate.ok()) return gate.with_context(me + ": every rank's GEMM libraries (train.deterministic)");
  ZDP_ASSIGN_OR_RETURN(const bool differs, store.check({kDiffers}));
  if (!differs) return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const std::string why, store.get(kDiffers, timeout));
  return Status(StatusCode::kInvalidArgument, why.rfind(me + " ", 0) == 0 ? why : me + ": " + why);
}

}  // namespace zdp::trainer
