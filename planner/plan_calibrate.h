// dp-launch plan --calibrate: a few seconds of measurements on this machine that replace
// the planner's assumed numbers: one rank's compute rate (a bare OpenBLAS GEMM at the
// model's layer shape, and micro-batches of the model itself through dp-train's layers on
// a one-rank engine: the rate the plan uses, since a small model spends much of its time
// outside GEMMs) with the rank's thread count, and the link (a 2-rank Gloo all-reduce
// over loopback, timed at two sizes and solved for alpha and beta; the two ranks are fresh
// processes, see run_calibration_peer). CPU ranks only: a GPU's rates come from --flops
// and --link.
#pragma once

#include <cstdint>
#include <string>

#include "planner/plan_cost.h"
#include "zdp/config.h"
#include "zdp/status.h"

namespace zdp::launcher {

struct CalibrateOptions {
  // The model to time (null: the GEMM alone). It is timed only where that is sound and
  // short (model_timing_refusal): else the GEMM stands in, and Calibration says why.
  const Config* config = nullptr;
  int64_t memory_bytes = 0;          // this machine's (usable_memory_bytes): the model may take a quarter
  double max_model_seconds = 10;     // its 5 micro-batches, predicted at the GEMM's rate
  int threads = 1;       // OpenBLAS threads of one rank (cores / local ranks)
  int64_t rows = 512;    // GEMM shape: [rows, in] x [in, out] (tokens of a micro-batch x layer)
  int64_t in = 256;
  int64_t out = 1024;
  int64_t small_bytes = 4 << 10;   // the two all-reduce sizes: latency-bound ...
  int64_t large_bytes = 32 << 20;  // ... and bandwidth-bound
  // The program run as the two all-reduce ranks, `<peer_program> calibrate-peer ...`
  // (run_calibration_peer); empty: this program (/proc/self/exe), i.e. dp-launch.
  std::string peer_program;
};

struct Calibration {
  double gemm_flops_per_s = 0;   // best of a few GEMMs
  std::string gemm;              // what was timed, e.g. "sgemm 512 x 256 x 1024, 1 thread"
  double model_flops_per_s = 0;  // the model's FLOPs per micro-batch / its median time (0: not timed)
  double micro_s = 0;            // that median: forward, backward and the (one-rank) optimizer step
  std::string model_skipped;     // why the model was not timed ("" when it was, or none was given)
  LinkModel link;          // alpha and beta of the loopback all-reduce (ring, K = 2)
  double small_s = 0;      // best all-reduce times behind the fit
  double large_s = 0;
  double seconds = 0;      // wall time of the whole calibration
};

// kInternal names the step that failed (GEMM, Gloo set-up, all-reduce).
StatusOr<Calibration> calibrate(const CalibrateOptions& options);

// Why `config`'s model is not to be timed on this machine, "" when it may be: a dtype a
// CPU rank does not compute in, its states and activations (one rank's, at world size 1)
// over a quarter of `memory_bytes`, or its 5 micro-batches predicted at `gemm_flops_per_s`
// past `max_seconds` (a GPU-sized model on a laptop took minutes, or all its memory).
std::string model_timing_refusal(const Config& config, int64_t memory_bytes, double gemm_flops_per_s,
                                 double max_seconds);

// One rank of the link measurement: what `dp-launch calibrate-peer` (hidden; calibrate()
// spawns two) runs in a fresh process. Joins the store at 127.0.0.1:port, times the
// all-reduce at both sizes and leaves the best seconds in the store for calibrate().
struct CalibrationPeer {
  int rank = 0;
  int port = 0;
  int64_t small_bytes = 0;
  int64_t large_bytes = 0;
};
Status run_calibration_peer(const CalibrationPeer& peer);

}  // namespace zdp::launcher
