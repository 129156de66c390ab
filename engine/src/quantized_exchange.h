// Compressed communication (zero.reduce_dtype / zero.gather_dtype = "int8" | "int4"): the
// gradient reduce-scatter as quantize -> all-to-all -> dequantize-and-sum, with error
// feedback, and the parameter all-gather as quantize -> all-gather -> dequantize.
//
// Why an all-to-all and not a quantized ring: a ring reduce-scatter adds at every hop, so
// each partial sum would be re-quantized K - 1 times and the errors would compound; here
// every rank quantizes each peer's slice of its own gradient once, sends it straight to
// its owner, and the owner sums the K - 1 dequantized chunks and its own slice (never
// quantized: it never travels) in fp32. Same bytes per rank as the ring: (K - 1)/K of the
// bucket, at 1 byte (int8) or half a byte (int4) per value plus 4 bytes per 256 values.
//
// Error feedback: what the codes of a value lost this step is kept (fp32, per rank,
// element for element with the flat buffer) and added to that value's gradient before
// the next step's quantization, so the error does not accumulate: the sum of what was
// sent over n steps differs from the sum of the gradients by one step's residual. The
// residual is in the units of the gradient it came from, which fp16's dynamic loss scale
// multiplies: each bucket remembers the scale its residual was kept at and rescales it
// when the next gradient comes at another one (a skipped step halves the scale, growth
// doubles it), so the residual always stands for the same unscaled gradient. A skipped
// step's residual is kept (its gradient is not sent again): one step's rounding.
//
// zero.compress = "inter-node": the same exchanges with each peer's chunk encoded by
// where the peer is. Peers on this rank's node get full precision (fp32 gradient slices,
// compute-dtype parameters) over the fast intra-node link; peers on other nodes get the
// quantized chunks. One shaped all_to_all (AllToAllShape: per-peer sizes in a common
// stride) moves the gradients; the gather is two shaped all_to_alls of one shared chunk
// each (quantized to other nodes, exact to this node). A rank's node comes from its
// launcher (LaunchEnv::node_rank), exchanged at finalize so every rank holds the same map.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/src/buffer_plan.h"
#include "engine/src/engine_env.h"
#include "engine/src/slot_pool.h"
#include "engine/src/timeline.h"

namespace zdp {

class QuantizedExchange {
 public:
  // `loss_scale`: the scale the trainer's gradients are multiplied by now (1 but with
  // fp16's dynamic scaling).
  QuantizedExchange(EngineEnv& env, const EngineOptions& options, const Layout& layout, Timeline& timeline,
                    std::function<double()> loss_scale)
      : env_(env), opt_(options), layout_(layout), timeline_(timeline), loss_scale_(std::move(loss_scale)) {}
  // The error feedback and the wire buffers (plan_buffers()); nothing when neither key asks.
  Status allocate(const BufferSizes& sizes);

  // zero.compress = "inter-node": learns every rank's node (collective; every rank calls
  // it at finalize), checked against each rank's LOCAL_WORLD_SIZE. REQUIRES: exec made.
  Status setup_nodes();

  bool reduces() const { return opt_.zero.reduce_quant != WireQuant::kNone; }
  bool gathers() const { return opt_.zero.gather_quant != WireQuant::kNone; }

  // Bucket b's gradient reduction. `send`: the bucket's gradient in fp32 (read on the
  // compute stream, then its own slice on the communication stream); `out`: this rank's
  // reduced slice in fp32 (may alias send's own slice), added into when `accumulate`.
  // Ends on the communication stream like a reduce-scatter.
  Status reduce_scatter(int b, const float* send, float* out, bool accumulate);
  // The all-gather of `count` values of bucket b: this rank's slice `own` (compute
  // dtype) quantized on the communication stream, every rank's dequantized into `out`
  // (count x K values, own slice included, so every rank holds the same parameters).
  Status all_gather(int b, const void* own, void* out, int64_t count);

  // Zeroes the error feedback (a resume: checkpoints do not keep it, README "Compressed
  // communication"), on the compute stream.
  Status reset_error();
  // The error feedback (fp32, T elements) or nullptr; for tests and the bias probe.
  const float* error() const { return error_.empty() ? nullptr : error_.as<float>(); }

  void count_memory(int64_t* measured) const;

 private:
  // Peer q gets full precision: zero.compress = "inter-node" and q on this rank's node.
  bool exact_to(int q) const {
    return !node_of_.empty() && node_of_[static_cast<size_t>(q)] == node_of_[static_cast<size_t>(env_.rank)];
  }
  // Bytes per rank and step for the timeline: K / (K - 1) x what this rank sends, so that
  // the profiler's (K - 1) / K bus factor gives back exactly the bytes sent.
  int64_t timeline_bytes(int64_t sent) const;
  // Bucket b's error feedback in the units of today's loss scale (see the file comment),
  // on the compute stream before the quantization reads it.
  Status match_loss_scale(int b);
  // The receive side of an inter-node reduction, on the communication stream: out =
  // [out] + own + every peer's chunk in rank order (fp32 ones added, quantized runs
  // dequantized and added).
  Status sum_mixed(const char* recv, int64_t stride, const float* own, float* out, bool accumulate,
                   int64_t slice, int bits);
  Status reduce_scatter_mixed(int b, const float* send, float* out, bool accumulate);
  Status all_gather_mixed(int b, const void* own, void* out, int64_t count);

  EngineEnv& env_;
  const EngineOptions& opt_;
  const Layout& layout_;
  Timeline& timeline_;
  std::function<double()> loss_scale_;
  DeviceBuffer error_;     // T x fp32, zero at first
  std::vector<double> error_scale_;  // per bucket: the loss scale its error feedback was kept at
  SlotPool reduce_wire_;   // per slot: K send chunks, then K receive chunks
  SlotPool gather_wire_;   // per slot: the own chunk, then K received chunks
  std::vector<int> node_of_;  // zero.compress = "inter-node": each rank's node; else empty
};

}  // namespace zdp
