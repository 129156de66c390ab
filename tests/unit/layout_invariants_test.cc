// Layout invariants (engine/src/layout.h): every combination of parameter lists (odd
// sizes, primes, layer groups with gaps), K 1..8, alignments, bucket sizes and both
// boundary modes gives a layout whose params, buckets, slices and shards all agree.
#include "engine/src/layout.h"

#include <gtest/gtest.h>

#include <climits>
#include <sstream>
#include <string>
#include <vector>

namespace zdp {
namespace {

constexpr int64_t kHuge = INT64_MAX;

// {param, param_offset, flat_offset, length, shard_offset} per segment, comparable.
using Tuples = std::vector<std::vector<int64_t>>;
Tuples seg_tuples(const std::vector<Segment>& segs) {
  Tuples out;
  for (const Segment& s : segs) out.push_back({s.param, s.param_offset, s.flat_offset, s.length, s.shard_offset});
  return out;
}

// ---- Invariant sweep -----------------------------------------------------------------------

struct ParamList {
  const char* name;
  std::vector<ParamSpec> specs;
};

std::vector<ParamList> param_lists() {
  std::vector<ParamList> lists;
  lists.push_back({"one", {{"w", {1}, 0}}});
  lists.push_back({"odd", {{"a", {3}, 0}, {"b", {7}, 0}, {"c", {1}, 1}, {"d", {10, 100}, 1}, {"e", {3, 11, 31}, 2}}});
  ParamList primes{"primes", {}};
  const int p[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 997};
  for (int i = 0; i < 16; ++i) primes.specs.push_back({"p" + std::to_string(p[i]), {p[i]}, i / 3});
  lists.push_back(primes);
  // Larger than any finite bucket of the sweep; layer groups with gaps.
  lists.push_back({"big", {{"emb", {17, 241}, 0}, {"s", {1}, 1}, {"m", {2053}, 3}, {"t", {7}, 3}, {"u", {1023}, 9}}});
  ParamList ones{"ones", {}};
  const int layers[] = {0, 0, 1, 1, 1, 2, 3, 3, 4};
  for (int i = 0; i < 9; ++i) ones.specs.push_back({"o" + std::to_string(i), {1, 1}, layers[i]});
  lists.push_back(ones);
  lists.push_back({"mixed", {{"x", {1000}, 0}, {"y", {1023}, 0}, {"z", {997}, 1}, {"w", {3}, 1}, {"v", {1}, 2}}});
  return lists;
}

#define INV(cond, what)                  \
  do {                                   \
    if (!(cond)) {                       \
      std::ostringstream inv_os_;        \
      inv_os_ << what << " [" #cond "]"; \
      return inv_os_.str();              \
    }                                    \
  } while (0)

// Checks every invariant of one layout; returns the first broken one ("" when all hold).
std::string check_invariants(const Layout& l, const std::vector<ParamSpec>& specs, const LayoutOptions& o) {
  const int k = o.world_size;
  const int64_t quantum = k * o.align_elems;
  const auto& ps = l.params();
  const auto& bs = l.buckets();
  const int nb = static_cast<int>(bs.size());
  INV(ps.size() == specs.size(), "param count");
  // bucket_elems rounded up to the quantum; saturated when that would overflow int64.
  const bool saturated = o.bucket_elems > INT64_MAX - (quantum - 1);
  INV(l.bucket_capacity() % quantum == 0 &&
          (saturated ? l.bucket_capacity() == INT64_MAX / quantum * quantum
                     : l.bucket_capacity() >= o.bucket_elems && l.bucket_capacity() - o.bucket_elems < quantum),
      "capacity " << l.bucket_capacity());

  // Params: the specs, in order, back to back inside a bucket.
  std::vector<int64_t> base(ps.size() + 1, 0);  // index of each param's elements in `covered`
  for (size_t i = 0; i < ps.size(); ++i) {
    int64_t numel = 1;
    for (int64_t d : specs[i].shape) numel *= d;
    INV(ps[i].name == specs[i].name && ps[i].shape == specs[i].shape && ps[i].layer == specs[i].layer &&
            ps[i].numel == numel,
        "param " << i << " spec");
    base[i + 1] = base[i] + numel;
    INV(0 <= ps[i].first_bucket && ps[i].first_bucket <= ps[i].last_bucket && ps[i].last_bucket < nb,
        "param " << i << " buckets");
    const Bucket& fb = bs[ps[i].first_bucket];
    const Bucket& lb = bs[ps[i].last_bucket];
    INV(fb.begin <= ps[i].offset && ps[i].offset < fb.begin + fb.payload, "param " << i << " starts in first_bucket");
    const int64_t last = ps[i].offset + ps[i].numel - 1;
    INV(lb.begin <= last && last < lb.begin + lb.payload, "param " << i << " ends in last_bucket");
    if (i == 0) {
      INV(ps[i].offset == 0, "first param at 0");
    } else if (ps[i - 1].last_bucket == ps[i].first_bucket) {
      INV(ps[i].offset == ps[i - 1].offset + ps[i - 1].numel, "param " << i << " follows its predecessor");
    } else {
      INV(ps[i].offset == fb.begin && ps[i - 1].last_bucket + 1 == ps[i].first_bucket,
          "param " << i << " opens a bucket");
    }
  }
  INV(l.payload_elems() == base.back(), "payload total");

  // Buckets: contiguous, padded to the quantum at the end only, cut by the rules.
  int64_t payload_sum = 0;
  for (int b = 0; b < nb; ++b) {
    const Bucket& bk = bs[b];
    INV(bk.begin == (b == 0 ? 0 : bs[b - 1].end()), "bucket " << b << " begin");
    INV(bk.size % quantum == 0 && bk.slice_size() % o.align_elems == 0 && bk.slice_size() * k == bk.size,
        "bucket " << b << " size " << bk.size);
    INV(bk.payload >= 1 && bk.payload <= l.bucket_capacity() && bk.padding() >= 0 && bk.padding() < quantum,
        "bucket " << b << " payload " << bk.payload << " padding " << bk.padding());
    INV(bk.padding() == 0 || bk.payload < l.bucket_capacity(), "bucket " << b << " full yet padded");
    const ParamPlacement& first = ps[bk.first_param];
    const ParamPlacement& last = ps[bk.last_param];
    INV(first.offset <= bk.begin && bk.begin < first.offset + first.numel, "bucket " << b << " first_param");
    const int64_t end = bk.begin + bk.payload;
    INV(last.offset < end && end <= last.offset + last.numel, "bucket " << b << " last_param");
    INV(bk.layer_begin == first.layer && bk.layer_end == last.layer + 1, "bucket " << b << " layers");
    if (bk.payload < l.bucket_capacity()) {  // closed early: at a param end, for a reason
      INV(end == last.offset + last.numel, "bucket " << b << " closed inside a param");
      const bool layer_change =
          bk.last_param + 1 < static_cast<int>(ps.size()) && ps[bk.last_param + 1].layer != last.layer;
      INV(b == nb - 1 || (o.boundary == BucketBoundary::kLayerGroups && layer_change),
          "bucket " << b << " closed early without a reason");
    }
    if (o.boundary == BucketBoundary::kLayerGroups) {
      INV(bk.layer_end - bk.layer_begin == 1,
          "bucket " << b << " spans layers " << bk.layer_begin << ".." << bk.layer_end);
    }
    INV(l.shard_offset(b) == (b == 0 ? 0 : l.shard_offset(b - 1) + bs[b - 1].slice_size()), "shard_offset " << b);
    payload_sum += bk.payload;
  }
  INV(payload_sum == l.payload_elems(), "bucket payloads");
  INV(l.total_elems() == (nb ? bs.back().end() : 0), "total");
  INV(l.shard_elems() * k == l.total_elems(), "shard * K");
  if (o.bucket_elems == kHuge && o.boundary == BucketBoundary::kAnywhere) INV(nb == 1, "one huge bucket");

  // Coverage: every element of every param exactly once across all (bucket, rank) slices.
  std::vector<uint8_t> covered(static_cast<size_t>(base.back()), 0);
  for (int r = 0; r < k; ++r) {
    std::vector<Segment> concat;
    for (int b = 0; b < nb; ++b) {
      const int64_t lo = l.slice_begin(b, r), hi = lo + bs[b].slice_size();
      INV(lo == bs[b].begin + r * bs[b].slice_size(), "slice_begin " << b << "," << r);
      int64_t prev_end = lo;
      for (const Segment& s : l.segments_in_slice(b, r)) {
        INV(s.length > 0 && s.flat_offset >= prev_end && s.flat_offset + s.length <= hi,
            "segment bounds " << b << "," << r);
        INV(s.param >= bs[b].first_param && s.param <= bs[b].last_param && s.bucket == b,
            "segment param " << b << "," << r);
        const ParamPlacement& p = ps[s.param];
        INV(s.param_offset >= 0 && s.param_offset + s.length <= p.numel && s.flat_offset == p.offset + s.param_offset,
            "segment offsets " << b << "," << r);
        INV(s.shard_offset == l.shard_offset(b) + (s.flat_offset - lo), "segment shard offset " << b << "," << r);
        for (int64_t j = 0; j < s.length; ++j) ++covered[base[s.param] + s.param_offset + j];
        prev_end = s.flat_offset + s.length;
        concat.push_back(s);
      }
    }
    const std::vector<Segment> shard = l.segments_of_shard(r);
    INV(seg_tuples(shard) == seg_tuples(concat), "segments_of_shard " << r);
    for (size_t i = 1; i < shard.size(); ++i) {
      INV(shard[i].shard_offset >= shard[i - 1].shard_offset + shard[i - 1].length, "shard order " << r);
    }
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    for (int64_t e = 0; e < ps[i].numel; ++e) {
      INV(covered[base[i] + e] == 1,
          "element " << e << " of param " << i << " covered " << int(covered[base[i] + e]) << " times");
    }
  }

  // Round trips: param element -> (bucket, rank, offsets) -> param element; padding is no one's.
  for (int i = 0; i < static_cast<int>(ps.size()); ++i) {
    for (int64_t e = 0; e < ps[i].numel; ++e) {
      const ElementLocation loc = l.locate(i, e);
      INV(loc.flat_offset == ps[i].offset + e && loc.slice_offset < bs[loc.bucket].slice_size() &&
              l.slice_begin(loc.bucket, loc.rank) + loc.slice_offset == loc.flat_offset &&
              loc.shard_offset == l.shard_offset(loc.bucket) + loc.slice_offset,
          "locate " << i << ":" << e);
      const ParamElement back = l.element_at(loc.flat_offset);
      INV(back.param == i && back.element == e, "element_at " << i << ":" << e);
      INV(l.flat_offset_of_shard(loc.rank, loc.shard_offset) == loc.flat_offset,
          "flat_offset_of_shard " << i << ":" << e);
    }
    INV(l.find(ps[i].name).ok() && *l.find(ps[i].name) == i, "find " << ps[i].name);
  }
  for (const Bucket& bk : bs) {
    for (int64_t f = bk.begin + bk.payload; f < bk.end(); ++f) INV(l.element_at(f).param == -1, "padding at " << f);
  }
  INV(l.find("no.such.param").status().code() == StatusCode::kNotFound, "find of a missing name");

  // Backward order and layer-group bucket ranges.
  const std::vector<int> order = l.backward_bucket_order();
  INV(static_cast<int>(order.size()) == nb, "backward order size");
  for (int i = 0; i < nb; ++i) INV(order[i] == nb - 1 - i, "backward order " << i);
  for (const ParamPlacement& p : ps) {
    const auto [first, end] = l.layer_buckets(p.layer);
    INV(first <= p.first_bucket && p.last_bucket < end, "layer_buckets(" << p.layer << ") holds " << p.name);
    for (int b = first; b < end; ++b) {
      INV(bs[b].layer_begin <= p.layer && p.layer < bs[b].layer_end, "layer_buckets(" << p.layer << ") bucket " << b);
    }
  }
  return "";
}

TEST(LayoutSweep, InvariantsHoldForEveryCombination) {
  const int64_t aligns[] = {1, 2, 4, 16};
  const int64_t bucket_sizes[] = {1, 3, 7, 64, 1000, kHuge};
  const BucketBoundary boundaries[] = {BucketBoundary::kAnywhere, BucketBoundary::kLayerGroups};
  int checked = 0;
  for (const ParamList& list : param_lists()) {
    for (int k = 1; k <= 8; ++k) {
      for (int64_t align : aligns) {
        for (int64_t bucket : bucket_sizes) {
          for (BucketBoundary boundary : boundaries) {
            LayoutOptions o;
            o.world_size = k;
            o.align_elems = align;
            o.bucket_elems = bucket;
            o.boundary = boundary;
            const std::string where = std::string(list.name) + " K=" + std::to_string(k) +
                                      " align=" + std::to_string(align) + " bucket=" + std::to_string(bucket) + " " +
                                      to_string(boundary);
            StatusOr<Layout> l = make_layout(list.specs, o);
            ASSERT_TRUE(l.ok()) << where << ": " << l.status().to_string();
            const std::string broken = check_invariants(*l, list.specs, o);
            ASSERT_EQ(broken, "") << where << "\n" << l->describe();
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 8 * 4 * 6 * 2);
}

}  // namespace
}  // namespace zdp
