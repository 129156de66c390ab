// Partition of one dtype's parameters into a flat buffer, buckets and per-rank slices
// (docs/design.md, "Layout: flat buffers, buckets, slices"). Pure arithmetic: no device, no
// communication, so every rule here is unit-tested exhaustively (tests/unit/layout_test.cc).
//
// The rules, in the order make_layout applies them:
//  1. Placement: parameters sit back to back in registration order, with no padding
//     between them inside a bucket (a parameter's offset is not aligned; slices are).
//  2. Cuts: a bucket is closed as soon as its payload reaches bucket_capacity(), which
//     is bucket_elems rounded up to a multiple of world_size * align_elems. Cuts fall at
//     exact element counts, so a large parameter spans several buckets and a bucket may
//     hold the tail of one parameter and the head of the next. With
//     BucketBoundary::kLayerGroups a bucket is also closed at every layer-group change,
//     so no bucket holds elements of two layer groups (stage 3 gathers one group alone).
//  3. Padding: a bucket's size is its payload rounded up to a multiple of
//     world_size * align_elems, padding at its end. Because the capacity is itself such a
//     multiple, a bucket closed by the capacity has no padding: padding only ever follows
//     the last element of a parameter, so every parameter is one contiguous range of the
//     flat padded buffer (a parameter view is a pointer + numel).
//  4. Slices: each bucket is split into world_size equal slices (multiples of
//     align_elems); rank r owns slice r of every bucket, and a rank's shard (its optimizer
//     state) is the concatenation of its slices in bucket order.
// An impossible configuration is a kInvalidArgument that says why; nothing falls back.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zdp/dtype.h"  // format_shape, for messages
#include "zdp/status.h"

namespace zdp {

// One registered parameter. layer = its layer group, >= 0 and non-decreasing in
// registration order.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int layer = 0;
};

// Where buckets may end. kLayerGroups (stage 3): a bucket never spans two layer groups.
enum class BucketBoundary { kAnywhere, kLayerGroups };
const char* to_string(BucketBoundary boundary);

struct LayoutOptions {
  int world_size = 1;        // K ranks; every bucket is split into K slices
  int64_t bucket_elems = 0;  // target elements per bucket (from bucket_mb and the dtype);
                             // rounded up to a multiple of world_size * align_elems
  int64_t align_elems = 1;   // each slice is a multiple of this (e.g. 64 bytes / element size)
  BucketBoundary boundary = BucketBoundary::kAnywhere;
};

struct ParamPlacement {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int layer = 0;
  int64_t offset = 0;    // first element in the flat padded buffer; the param is contiguous
  int first_bucket = 0;  // buckets holding its elements, inclusive
  int last_bucket = 0;
};

struct Bucket {
  int64_t begin = 0;    // flat offset of its first element
  int64_t size = 0;     // padded; a multiple of world_size * align_elems
  int64_t payload = 0;  // elements that belong to params: [begin, begin + payload)
  int world_size = 1;
  int first_param = 0;  // params with elements in this bucket, inclusive
  int last_param = 0;
  int layer_begin = 0;  // layer groups of those params: [layer_begin, layer_end)
  int layer_end = 0;

  int64_t slice_size() const { return size / world_size; }
  int64_t padding() const { return size - payload; }
  int64_t end() const { return begin + size; }
};

// One contiguous run of a parameter inside one rank's slice of one bucket.
struct Segment {
  int param = 0;
  int64_t param_offset = 0;  // element offset inside the param
  int64_t flat_offset = 0;   // in the flat padded buffer
  int64_t length = 0;
  int bucket = 0;            // the bucket it lies in
  int64_t shard_offset = 0;  // where it sits in the owning rank's shard
};

// Where one element lives: its bucket, the rank owning it, and its offsets.
struct ElementLocation {
  int bucket = 0;
  int rank = 0;
  int64_t flat_offset = 0;
  int64_t slice_offset = 0;  // inside slice `rank` of `bucket`
  int64_t shard_offset = 0;  // inside rank `rank`'s shard
};

// What a flat offset holds: param -1 means bucket padding.
struct ParamElement {
  int param = -1;
  int64_t element = 0;
};

class Layout {
 public:
  Layout() = default;  // empty: no params, world_size 1

  int world_size() const { return options_.world_size; }
  const LayoutOptions& options() const { return options_; }
  // bucket_elems rounded up to a multiple of world_size * align_elems.
  int64_t bucket_capacity() const { return capacity_; }
  int64_t total_elems() const { return total_; }                 // the flat padded buffer
  int64_t payload_elems() const { return payload_; }             // sum of numel
  int64_t shard_elems() const { return total_ / world_size(); }  // one rank's slices
  int64_t max_bucket_elems() const { return max_bucket_; }       // padded; staging buffer size

  const std::vector<ParamPlacement>& params() const { return params_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // The accessors below throw zdp::Error (kInvalidArgument) for an out-of-range bucket,
  // rank, param or offset.
  // Flat offset of slice `rank` of `bucket`.
  int64_t slice_begin(int bucket, int rank) const;
  // Where bucket b's slice sits in a rank's shard (the same for every rank).
  int64_t shard_offset(int bucket) const;
  // The params (parts) covered by that slice, in order; padding excluded (may be empty).
  std::vector<Segment> segments_in_slice(int bucket, int rank) const;
  // All of a rank's owned parts, in shard order.
  std::vector<Segment> segments_of_shard(int rank) const;

  StatusOr<int> find(const std::string& name) const;  // kNotFound names it
  // Element `element` of param `param` -> its bucket, owner and offsets.
  ElementLocation locate(int param, int64_t element) const;
  // The reverse: what sits at a flat offset, or at an offset of a rank's shard.
  ParamElement element_at(int64_t flat_offset) const;
  int64_t flat_offset_of_shard(int rank, int64_t shard_offset) const;
  // Buckets holding elements of layer group `layer`: [first, second); empty if none.
  std::pair<int, int> layer_buckets(int layer) const;

  // Buckets in the order their gradients complete during backward: backward produces
  // gradients in reverse registration order, so the last bucket completes first.
  std::vector<int> backward_bucket_order() const;

  // Table for logs: one line per bucket with its params, size and padding.
  std::string describe() const;

 private:
  friend StatusOr<Layout> make_layout(const std::vector<ParamSpec>& params, const LayoutOptions& options);

  // Throw zdp::Error (kInvalidArgument) naming `fn` when an index is out of range.
  void check_bucket(const char* fn, int bucket) const;
  void check_rank(const char* fn, int rank) const;
  void check_param(const char* fn, int param) const;
  int bucket_of_flat(int64_t flat_offset) const;

  LayoutOptions options_;
  int64_t capacity_ = 0;
  int64_t total_ = 0;
  int64_t payload_ = 0;
  int64_t max_bucket_ = 0;
  std::vector<ParamPlacement> params_;
  std::vector<Bucket> buckets_;
  std::unordered_map<std::string, int> index_;
};

// Validates `params` and `options` and builds the layout (rules at the top of this file).
// kInvalidArgument, naming the param/value: empty name, duplicate name (both indices),
// empty shape or a dimension <= 0, negative or decreasing layer groups, world_size < 1,
// bucket_elems < 1, align_elems < 1, element counts that overflow int64.
// No params is not an error: the layout is empty (no buckets, total 0).
StatusOr<Layout> make_layout(const std::vector<ParamSpec>& params, const LayoutOptions& options);


}  // namespace zdp
