// The engine's layout and buffer-size rules (buffer_plan.h): the engine's parts and
// plan_memory() both size every buffer here.
#include "engine/src/buffer_plan.h"

#include <algorithm>
#include <cmath>

#include "engine/src/ordered_sum.h"
#include "kernels/exact_sumsq.h"
#include "kernels/grad_check.h"
#include "kernels/quantize.h"

namespace zdp {

LayoutOptions engine_layout_options(const EngineOptions& options, int world_size) {
  LayoutOptions lo;
  lo.world_size = world_size;
  lo.bucket_elems = std::max<int64_t>(1, std::llround(options.zero.bucket_mb * 1024.0 * 1024.0 /
                                                      static_cast<double>(dtype_size(options.compute_dtype))));
  lo.align_elems = kAlignElems;
  // Stage 3 gathers one layer group alone, so no bucket may hold two of them. Stages 2-3
  // stage the trainer's gradients per run of buckets that parameters connect; cut
  // anywhere, parameters straddling buckets would chain every bucket into one run (the
  // whole gradient, twice), so layer groups bound the runs there too.
  lo.boundary = options.zero.shards_grads() ? BucketBoundary::kLayerGroups : BucketBoundary::kAnywhere;
  return lo;
}

int optimizer_moments(const OptimConfig& optim) {
  if (optim.name == OptimizerKind::kAdamW) return 2;
  return optim.beta1 != 0.0 ? 1 : 0;  // [optim] beta1 is SGD's momentum (config.h)
}

bool joins_previous_bucket(const Layout& layout, int b) {
  if (b <= 0) return false;
  const Bucket& previous = layout.buckets()[static_cast<size_t>(b - 1)];
  return layout.params()[static_cast<size_t>(previous.last_param)].last_bucket >= b;
}

std::vector<int64_t> layer_group_elems(const Layout& layout) {
  std::vector<int64_t> out;
  const std::vector<ParamPlacement>& params = layout.params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (i > 0 && params[i].layer == params[i - 1].layer) continue;
    const auto [first, end] = layout.layer_buckets(params[i].layer);
    const std::vector<Bucket>& buckets = layout.buckets();
    out.push_back(buckets[static_cast<size_t>(end - 1)].end() - buckets[static_cast<size_t>(first)].begin);
  }
  return out;
}

int64_t wire_chunk_bytes(int64_t slice, WireQuant quant) {
  return kernels::quant_chunk_bytes(slice, wire_bits(quant));  // a multiple of 16 bytes
}

int64_t wire_stride_bytes(int64_t slice, WireQuant quant, CompressScope compress) {
  const int64_t chunk = wire_chunk_bytes(slice, quant);
  if (compress == CompressScope::kAll) return chunk;
  return std::max(chunk, (slice * 4 + 15) / 16 * 16);
}

Status check_layout_for_options(const Layout& layout, const EngineOptions& options) {
  if (options.deterministic && layout.total_elems() > kernels::kExactMaxElements) {
    // The exact norm's integers have room for 2^32 squares (kernels/exact_sumsq.h).
    return Status(StatusCode::kInvalidArgument,
                  "train.deterministic: the model's " + std::to_string(layout.total_elems()) +
                      " padded elements exceed the exact gradient norm's limit of " +
                      std::to_string(kernels::kExactMaxElements));
  }
  return Status::Ok();
}

bool accumulates_in_reduce_copy(const EngineOptions& options) {
  return options.accum_steps > 1 && !shards_accumulation(options) && !options.deterministic &&
         !options.zero.shards_grads() && options.zero.reduce_dtype == DType::kF32 &&
         options.compute_dtype != DType::kF32;
}

BufferSizes plan_buffers(const Layout& layout, const EngineOptions& options, DeviceKind device) {
  const int64_t T = layout.total_elems(), S = layout.shard_elems();
  const int64_t c = static_cast<int64_t>(dtype_size(options.compute_dtype));
  const int64_t r = static_cast<int64_t>(dtype_size(options.zero.reduce_dtype));
  const bool cast = options.zero.reduce_dtype != options.compute_dtype;
  const int num_buckets = static_cast<int>(layout.buckets().size());

  BufferSizes z;
  z.params = (options.zero.shards_params() ? S : T) * c;
  if (!options.zero.shards_grads()) {
    z.grads = T * c;  // the trainer writes here; reduced in place unless cast
    z.reduce_copy = cast ? T * r : 0;
  } else {
    // The reduce-scatter output; sharded accumulation adds every micro-batch's into it in fp32.
    z.grads = S * (shards_accumulation(options) ? 4 : r);
  }
  // Local accumulation: no communication before the last micro-batch, so every stage
  // accumulates in full.
  const bool local_accum = options.accum_steps > 1 && !shards_accumulation(options) && !options.deterministic;
  z.accum = local_accum && !accumulates_in_reduce_copy(options) ? T * 4 : 0;
  const int64_t state = (options.zero.shards_optimizer() ? S : T) * 4;
  const int moments = optimizer_moments(options.optim);
  z.master = state;
  z.m = moments >= 1 ? state : 0;
  z.v = moments >= 2 ? state : 0;
  z.grad_stats = std::max(1, num_buckets) * static_cast<int64_t>(sizeof(kernels::GradStats));
  if (options.deterministic) z.grad_stats = std::max<int64_t>(z.grad_stats, sizeof(kernels::ExactSumSq));
  if (device == DeviceKind::kCuda) {
    const int64_t largest_slice = layout.max_bucket_elems() / layout.options().world_size;
    z.norm_scratch = std::max<int64_t>(1, kernels::grad_check_workspace_bytes(largest_slice));
  }
  if (options.zero.shards_grads()) {
    int64_t largest_group = 0, group_begin = 0;
    int groups = 0;
    for (int b = 0; b < num_buckets; ++b) {
      const Bucket& bk = layout.buckets()[static_cast<size_t>(b)];
      if (!joins_previous_bucket(layout, b)) group_begin = bk.begin, ++groups;
      largest_group = std::max(largest_group, bk.end() - group_begin);
    }
    // Two: backward fills one group while the previous one is reduced. Without overlap
    // nothing is reduced before the micro-batch ends (step(), or each micro-batch with
    // sharded accumulation): every group is held until then (the pool grew to that,
    // beyond this plan, and warned of a registration order that was not the cause).
    z.grad_staging = {largest_group * c, options.zero.overlap ? 2 : std::max(2, groups)};
    if ((cast || local_accum) && !options.deterministic) z.reduce_staging = {layout.max_bucket_elems() * r, 2};
  }
  if (options.deterministic) {
    const int world = layout.options().world_size;
    z.ordered_gather = world * layout.max_bucket_elems() * c;
    z.ordered_partials = OrderedSum::max_depth(world * options.accum_steps) *
                         (options.zero.shards_optimizer() ? S : T) * 4;
  }
  if (options.zero.shards_params()) {
    const std::vector<int64_t> groups = layer_group_elems(layout);
    const int64_t largest_layer = groups.empty() ? 0 : *std::max_element(groups.begin(), groups.end());
    // The group in use plus the prefetched ones: at most every other group (a
    // prefetch_layers of 1000 over 2 groups allocated 1001 buffers).
    const int64_t others = std::max<int64_t>(0, static_cast<int64_t>(groups.size()) - 1);
    // Plus the scopes a trainer nests inside another (EngineOptions::nested_layer_scopes),
    // within the groups there are.
    const int64_t held = 1 + std::min<int64_t>(options.zero.prefetch_layers, others) + options.nested_layer_scopes;
    z.param_gather = {largest_layer * c, static_cast<int>(std::min<int64_t>(held, std::max<int64_t>(1, groups.size())))};
  }
  // Compressed communication: each rank's error feedback is element for element with the
  // flat buffer (its own slices stay zero: they never travel, so they are never
  // quantized); two wire buffers per direction, so that quantizing the next bucket
  // overlaps the exchange of the previous one.
  const int K = layout.options().world_size;
  const int64_t largest_slice = layout.max_bucket_elems() / K;
  if (options.zero.reduce_quant != WireQuant::kNone) {
    z.error_feedback = options.zero.error_feedback ? T * 4 : 0;
    z.reduce_wire = {2 * K * wire_stride_bytes(largest_slice, options.zero.reduce_quant, options.zero.compress), 2};
  }
  if (options.zero.gather_quant != WireQuant::kNone) {
    z.gather_wire = {(K + 1) * wire_chunk_bytes(largest_slice, options.zero.gather_quant), 2};
  }
  return z;
}

}  // namespace zdp
