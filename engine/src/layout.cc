// make_layout (validation, placement, bucket cuts, padding) and the Layout queries that
// map params <-> buckets <-> rank slices. The rules are stated in layout.h.
#include "engine/src/layout.h"

#include <algorithm>
#include <climits>
#include <iomanip>
#include <sstream>

namespace zdp {
namespace {

// Checked int64 arithmetic: false on overflow. (GCC/Clang builtins; the runtime is
// built by one of them, and they are exact where a hand-written check is easy to get wrong.)
bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool round_up(int64_t value, int64_t multiple, int64_t* out) {
  int64_t bumped = 0;
  if (!checked_add(value, multiple - 1, &bumped)) return false;
  *out = bumped / multiple * multiple;
  return true;
}

Status invalid(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

std::string param_label(int index, const std::string& name) {
  return "param #" + std::to_string(index) + " '" + name + "'";
}

Status check_options(const LayoutOptions& o) {
  if (o.world_size < 1) return invalid("world_size must be >= 1, got " + std::to_string(o.world_size));
  if (o.bucket_elems < 1) {
    return invalid("bucket_elems must be >= 1, got " + std::to_string(o.bucket_elems) +
                   " (bucket_mb too small for the element size?)");
  }
  if (o.align_elems < 1) return invalid("align_elems must be >= 1, got " + std::to_string(o.align_elems));
  int64_t quantum = 0;
  if (!checked_mul(o.world_size, o.align_elems, &quantum)) {
    return invalid("world_size (" + std::to_string(o.world_size) + ") * align_elems (" + std::to_string(o.align_elems) +
                   ") overflows int64");
  }
  return Status::Ok();
}

// Validates one spec and returns its element count.
StatusOr<int64_t> checked_numel(int index, const ParamSpec& spec) {
  if (spec.name.empty()) return invalid("param #" + std::to_string(index) + " has an empty name");
  if (spec.shape.empty()) {
    return invalid(param_label(index, spec.name) + " has an empty shape (give a scalar as shape [1])");
  }
  int64_t numel = 1;
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shape[d] <= 0) {
      return invalid(param_label(index, spec.name) + " has dimension " + std::to_string(d) + " = " +
                     std::to_string(spec.shape[d]) + " in shape " + format_shape(spec.shape) +
                     "; every dimension must be >= 1");
    }
    if (!checked_mul(numel, spec.shape[d], &numel)) {
      return invalid(param_label(index, spec.name) + ": the element count of shape " + format_shape(spec.shape) +
                     " overflows int64");
    }
  }
  if (spec.layer < 0) {
    return invalid(param_label(index, spec.name) + " has layer group " + std::to_string(spec.layer) +
                   "; layer groups must be >= 0");
  }
  return numel;
}

}  // namespace

const char* to_string(BucketBoundary boundary) {
  switch (boundary) {
    case BucketBoundary::kAnywhere: return "anywhere";
    case BucketBoundary::kLayerGroups: return "layer-groups";
  }
  return "unknown";
}

StatusOr<Layout> make_layout(const std::vector<ParamSpec>& specs, const LayoutOptions& options) {
  ZDP_RETURN_IF_ERROR(check_options(options));
  const int64_t quantum = options.world_size * options.align_elems;  // checked above
  Layout layout;
  layout.options_ = options;
  // A bucket closed by its capacity must need no padding, or the padding would split the
  // parameter it cuts. A bucket_elems too large to round up is simply never reached.
  if (!round_up(options.bucket_elems, quantum, &layout.capacity_)) layout.capacity_ = INT64_MAX / quantum * quantum;

  // Validate every spec before placing anything.
  layout.params_.reserve(specs.size());
  int64_t payload = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const int index = static_cast<int>(i);
    const ParamSpec& spec = specs[i];
    ZDP_ASSIGN_OR_RETURN(const int64_t numel, checked_numel(index, spec));
    const auto [it, inserted] = layout.index_.emplace(spec.name, index);
    if (!inserted) {
      return invalid(param_label(index, spec.name) + " duplicates the name of param #" + std::to_string(it->second));
    }
    if (i > 0 && spec.layer < specs[i - 1].layer) {
      return invalid(param_label(index, spec.name) + " has layer group " + std::to_string(spec.layer) + " after " +
                     param_label(index - 1, specs[i - 1].name) + " in layer group " +
                     std::to_string(specs[i - 1].layer) +
                     ": layer groups must be non-decreasing in registration order");
    }
    if (!checked_add(payload, numel, &payload)) {
      return invalid("the total element count overflows int64 at " + param_label(index, spec.name) + " (" +
                     std::to_string(numel) + " elements)");
    }
    ParamPlacement placement;
    placement.name = spec.name;
    placement.shape = spec.shape;
    placement.numel = numel;
    placement.layer = spec.layer;
    layout.params_.push_back(std::move(placement));
  }
  layout.payload_ = payload;
  if (payload / layout.capacity_ >= INT_MAX) {
    return invalid(std::to_string(payload) + " elements in buckets of " + std::to_string(layout.capacity_) +
                   " elements need at least 2^31 - 1 buckets; raise bucket_elems");
  }

  // Place params back to back; cut and pad buckets.
  std::vector<Bucket>& buckets = layout.buckets_;
  int64_t cursor = 0;  // next free flat offset
  Bucket open;         // the bucket being filled; its index is buckets.size()
  bool is_open = false;
  auto overflow = [&](int index) {
    return invalid("the padded flat buffer overflows int64 at " + param_label(index, specs[index].name) + " (K " +
                   std::to_string(options.world_size) + ", align_elems " + std::to_string(options.align_elems) + ")");
  };
  auto close = [&](int index) -> Status {
    int64_t end = 0;
    if (!round_up(open.payload, quantum, &open.size) || !checked_add(open.begin, open.size, &end)) {
      return overflow(index);
    }
    if (buckets.size() + 1 >= static_cast<size_t>(INT_MAX)) {
      return invalid("more than 2^31 buckets at " + param_label(index, specs[index].name) + "; raise bucket_elems");
    }
    open.layer_end = layout.params_[open.last_param].layer + 1;
    layout.max_bucket_ = std::max(layout.max_bucket_, open.size);
    buckets.push_back(open);
    cursor = end;
    is_open = false;
    return Status::Ok();
  };
  for (size_t i = 0; i < layout.params_.size(); ++i) {
    const int index = static_cast<int>(i);
    ParamPlacement& p = layout.params_[i];
    if (is_open && options.boundary == BucketBoundary::kLayerGroups && p.layer != layout.params_[i - 1].layer) {
      ZDP_RETURN_IF_ERROR(close(index - 1));
    }
    p.offset = cursor;
    p.first_bucket = static_cast<int>(buckets.size());
    int64_t remaining = p.numel;
    while (remaining > 0) {
      if (!is_open) {
        open = Bucket();
        open.begin = cursor;
        open.world_size = options.world_size;
        open.first_param = index;
        open.layer_begin = p.layer;
        is_open = true;
      }
      const int64_t take = std::min(remaining, layout.capacity_ - open.payload);
      open.payload += take;
      open.last_param = index;
      remaining -= take;
      if (!checked_add(cursor, take, &cursor)) return overflow(index);
      if (open.payload == layout.capacity_) ZDP_RETURN_IF_ERROR(close(index));
    }
    p.last_bucket = static_cast<int>(buckets.size()) - (is_open ? 0 : 1);
  }
  if (is_open) ZDP_RETURN_IF_ERROR(close(static_cast<int>(layout.params_.size()) - 1));
  layout.total_ = cursor;
  return layout;
}

void Layout::check_bucket(const char* fn, int bucket) const {
  if (bucket < 0 || bucket >= static_cast<int>(buckets_.size())) {
    throw Error(invalid(std::string("Layout::") + fn + ": bucket " + std::to_string(bucket) + " is out of range [0, " +
                        std::to_string(buckets_.size()) + ")"));
  }
}

void Layout::check_rank(const char* fn, int rank) const {
  if (rank < 0 || rank >= world_size()) {
    throw Error(invalid(std::string("Layout::") + fn + ": rank " + std::to_string(rank) + " is out of range [0, " +
                        std::to_string(world_size()) + ")"));
  }
}

void Layout::check_param(const char* fn, int param) const {
  if (param < 0 || param >= static_cast<int>(params_.size())) {
    throw Error(invalid(std::string("Layout::") + fn + ": param " + std::to_string(param) + " is out of range [0, " +
                        std::to_string(params_.size()) + ")"));
  }
}

int Layout::bucket_of_flat(int64_t flat_offset) const {
  const auto it = std::upper_bound(buckets_.begin(), buckets_.end(), flat_offset,
                                   [](int64_t off, const Bucket& b) { return off < b.begin; });
  return static_cast<int>(it - buckets_.begin()) - 1;
}

int64_t Layout::slice_begin(int bucket, int rank) const {
  check_bucket("slice_begin", bucket);
  check_rank("slice_begin", rank);
  const Bucket& b = buckets_[bucket];
  return b.begin + rank * b.slice_size();
}

int64_t Layout::shard_offset(int bucket) const {
  check_bucket("shard_offset", bucket);
  // Every earlier bucket contributes size / K to each shard, and sizes are multiples of K.
  return buckets_[bucket].begin / world_size();
}

std::vector<Segment> Layout::segments_in_slice(int bucket, int rank) const {
  const int64_t lo = slice_begin(bucket, rank);
  const Bucket& b = buckets_[bucket];
  const int64_t hi = std::min(lo + b.slice_size(), b.begin + b.payload);  // padding excluded
  const int64_t shard_base = shard_offset(bucket);
  std::vector<Segment> out;
  // The first param ending after lo: the last one starting at or before it.
  const auto first = params_.begin() + b.first_param;
  const auto last = params_.begin() + b.last_param + 1;
  auto it = std::upper_bound(first, last, lo, [](int64_t off, const ParamPlacement& p) { return off < p.offset; });
  if (it != first) --it;
  for (; it != last && it->offset < hi; ++it) {
    const int64_t s = std::max(lo, it->offset);
    const int64_t e = std::min(hi, it->offset + it->numel);
    if (s >= e) continue;
    Segment seg;
    seg.param = static_cast<int>(it - params_.begin());
    seg.param_offset = s - it->offset;
    seg.flat_offset = s;
    seg.length = e - s;
    seg.bucket = bucket;
    seg.shard_offset = shard_base + (s - lo);
    out.push_back(seg);
  }
  return out;
}

std::vector<Segment> Layout::segments_of_shard(int rank) const {
  check_rank("segments_of_shard", rank);
  std::vector<Segment> out;
  for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
    std::vector<Segment> part = segments_in_slice(b, rank);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

StatusOr<int> Layout::find(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    return Status(StatusCode::kNotFound,
                  "no parameter named '" + name + "' in the layout (" + std::to_string(params_.size()) + " params)");
  }
  return it->second;
}

ElementLocation Layout::locate(int param, int64_t element) const {
  check_param("locate", param);
  const ParamPlacement& p = params_[param];
  if (element < 0 || element >= p.numel) {
    throw Error(invalid("Layout::locate: element " + std::to_string(element) + " of " + param_label(param, p.name) +
                        " is out of range [0, " + std::to_string(p.numel) + ")"));
  }
  ElementLocation loc;
  loc.flat_offset = p.offset + element;
  loc.bucket = bucket_of_flat(loc.flat_offset);
  const Bucket& b = buckets_[loc.bucket];
  loc.rank = static_cast<int>((loc.flat_offset - b.begin) / b.slice_size());
  loc.slice_offset = (loc.flat_offset - b.begin) % b.slice_size();
  loc.shard_offset = b.begin / world_size() + loc.slice_offset;
  return loc;
}

ParamElement Layout::element_at(int64_t flat_offset) const {
  if (flat_offset < 0 || flat_offset >= total_) {
    throw Error(invalid("Layout::element_at: flat offset " + std::to_string(flat_offset) + " is out of range [0, " +
                        std::to_string(total_) + ")"));
  }
  const Bucket& b = buckets_[bucket_of_flat(flat_offset)];
  ParamElement out;
  if (flat_offset >= b.begin + b.payload) return out;  // padding
  const auto first = params_.begin() + b.first_param;
  const auto last = params_.begin() + b.last_param + 1;
  const auto it =
      std::upper_bound(first, last, flat_offset, [](int64_t off, const ParamPlacement& p) { return off < p.offset; }) -
      1;
  out.param = static_cast<int>(it - params_.begin());
  out.element = flat_offset - it->offset;
  return out;
}

int64_t Layout::flat_offset_of_shard(int rank, int64_t shard_offset) const {
  check_rank("flat_offset_of_shard", rank);
  if (shard_offset < 0 || shard_offset >= shard_elems()) {
    throw Error(invalid("Layout::flat_offset_of_shard: shard offset " + std::to_string(shard_offset) +
                        " is out of range [0, " + std::to_string(shard_elems()) + ")"));
  }
  const int k = world_size();
  const auto it = std::upper_bound(buckets_.begin(), buckets_.end(), shard_offset,
                                   [k](int64_t off, const Bucket& b) { return off < b.begin / k; }) -
                  1;
  return it->begin + rank * it->slice_size() + (shard_offset - it->begin / k);
}

std::pair<int, int> Layout::layer_buckets(int layer) const {
  const auto it = std::lower_bound(params_.begin(), params_.end(), layer,
                                   [](const ParamPlacement& p, int l) { return p.layer < l; });
  if (it == params_.end() || it->layer != layer) return {0, 0};
  const auto end =
      std::upper_bound(it, params_.end(), layer, [](int l, const ParamPlacement& p) { return l < p.layer; });
  return {it->first_bucket, (end - 1)->last_bucket + 1};
}

std::vector<int> Layout::backward_bucket_order() const {
  std::vector<int> order(buckets_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(order.size() - 1 - i);
  return order;
}

std::string Layout::describe() const {
  std::ostringstream os;
  os << "layout: " << params_.size() << " params, " << payload_ << " elements in " << buckets_.size() << " buckets ("
     << total_ << " with " << (total_ - payload_) << " padding), K " << world_size() << ", align_elems "
     << options_.align_elems << ", bucket capacity " << capacity_ << " (bucket_elems " << options_.bucket_elems
     << "), boundary " << to_string(options_.boundary) << ", shard " << shard_elems() << " elements per rank\n";
  os << std::setw(6) << "bucket" << std::setw(14) << "begin" << std::setw(12) << "size" << std::setw(12) << "payload"
     << std::setw(9) << "padding" << std::setw(12) << "slice"
     << "  " << std::left << std::setw(9) << "layers" << std::right << "params\n";
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket& b = buckets_[i];
    const std::string layers = b.layer_end - b.layer_begin == 1
                                   ? std::to_string(b.layer_begin)
                                   : std::to_string(b.layer_begin) + "-" + std::to_string(b.layer_end - 1);
    os << std::setw(6) << i << std::setw(14) << b.begin << std::setw(12) << b.size << std::setw(12) << b.payload
       << std::setw(9) << b.padding() << std::setw(12) << b.slice_size() << "  " << std::left << std::setw(9) << layers
       << std::right;
    // At most three params are named per bucket: first, second, ..., last.
    const int count = b.last_param - b.first_param + 1;
    for (int p = b.first_param; p <= b.last_param; ++p) {
      if (count > 3 && p > b.first_param + 1 && p < b.last_param) {
        if (p == b.first_param + 2) os << " ..";
        continue;
      }
      const ParamPlacement& pp = params_[p];
      const int64_t s = std::max(b.begin, pp.offset) - pp.offset;
      const int64_t e = std::min(b.begin + b.payload, pp.offset + pp.numel) - pp.offset;
      os << ' ' << pp.name;
      if (s != 0 || e != pp.numel) os << '[' << s << ':' << e << ')';
    }
    if (count > 3) os << " (" << count << " params)";
    os << '\n';
  }
  return os.str();
}

}  // namespace zdp
