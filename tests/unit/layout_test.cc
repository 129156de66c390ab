// Layout (flat buffer -> buckets -> rank slices): hand-computed layouts, both boundary
// modes, re-sharding through parameter names, and every error message. The invariant
// sweep over K 1..8 is layout_invariants_test; the memory formula zero_memory_test.
#include "engine/src/layout.h"

#include <gtest/gtest.h>

#include <climits>

namespace zdp {
namespace {

constexpr int64_t kHuge = INT64_MAX;

Layout make_ok(const std::vector<ParamSpec>& specs, int k, int64_t align, int64_t bucket,
               BucketBoundary boundary = BucketBoundary::kAnywhere) {
  LayoutOptions o;
  o.world_size = k;
  o.align_elems = align;
  o.bucket_elems = bucket;
  o.boundary = boundary;
  StatusOr<Layout> layout = make_layout(specs, o);
  EXPECT_TRUE(layout.ok()) << layout.status().to_string();
  return std::move(layout).value();
}

// Layout records as comparable tuples, so a hand-computed layout reads as a table.
using Tuples = std::vector<std::vector<int64_t>>;
// {param, param_offset, flat_offset, length, shard_offset}
Tuples seg_tuples(const std::vector<Segment>& segs) {
  Tuples out;
  for (const Segment& s : segs) out.push_back({s.param, s.param_offset, s.flat_offset, s.length, s.shard_offset});
  return out;
}
Tuples bucket_tuples(const Layout& l) {
  Tuples out;
  for (const Bucket& b : l.buckets()) {
    out.push_back(
        {b.begin, b.size, b.payload, b.slice_size(), b.first_param, b.last_param, b.layer_begin, b.layer_end});
  }
  return out;
}
Tuples param_tuples(const Layout& l) {
  Tuples out;
  for (const ParamPlacement& p : l.params()) out.push_back({p.offset, p.numel, p.first_bucket, p.last_bucket});
  return out;
}

// ---- Hand-computed layouts ---------------------------------------------------------------

// a[10] b[7] (layer 0), c[20] (layer 1); K=2, align 4, bucket 16: quantum 8, capacity 16.
//   bucket 0 [0,16)  payload 16: a[0:10) b[0:6)          slices of 8: [0,8) [8,16)
//   bucket 1 [16,32) payload 16: b[6:7) c[0:15)          slices of 8: [16,24) [24,32)
//   bucket 2 [32,40) payload 5:  c[15:20) + 3 padding    slices of 4: [32,36) [36,40)
// Shard: 8 + 8 + 4 = 20 elements per rank; shard offsets 0, 8, 16.
const std::vector<ParamSpec> kAbc = {{"a", {10}, 0}, {"b", {7}, 0}, {"c", {4, 5}, 1}};

TEST(LayoutClosedForm, CutAnywhere) {
  const Layout l = make_ok(kAbc, 2, 4, 16);
  EXPECT_EQ(l.bucket_capacity(), 16);
  EXPECT_EQ(l.total_elems(), 40);
  EXPECT_EQ(l.payload_elems(), 37);
  EXPECT_EQ(l.shard_elems(), 20);
  EXPECT_EQ(l.max_bucket_elems(), 16);
  ASSERT_EQ(l.buckets().size(), 3u);
  // {begin, size, payload, slice, first_param, last_param, layer_begin, layer_end}
  EXPECT_EQ(bucket_tuples(l),
            (Tuples{{0, 16, 16, 8, 0, 1, 0, 1}, {16, 16, 16, 8, 1, 2, 0, 2}, {32, 8, 5, 4, 2, 2, 1, 2}}));
  EXPECT_EQ(l.buckets()[2].padding(), 3);
  // {offset, numel, first_bucket, last_bucket}
  EXPECT_EQ(param_tuples(l), (Tuples{{0, 10, 0, 0}, {10, 7, 0, 1}, {17, 20, 1, 2}}));
  EXPECT_EQ(l.slice_begin(1, 1), 24);
  EXPECT_EQ(l.shard_offset(0), 0);
  EXPECT_EQ(l.shard_offset(1), 8);
  EXPECT_EQ(l.shard_offset(2), 16);

  EXPECT_EQ(seg_tuples(l.segments_in_slice(0, 0)), (Tuples{{0, 0, 0, 8, 0}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(0, 1)), (Tuples{{0, 8, 8, 2, 0}, {1, 0, 10, 6, 2}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(1, 0)), (Tuples{{1, 6, 16, 1, 8}, {2, 0, 17, 7, 9}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(1, 1)), (Tuples{{2, 7, 24, 8, 8}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(2, 0)), (Tuples{{2, 15, 32, 4, 16}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(2, 1)), (Tuples{{2, 19, 36, 1, 16}}));
  EXPECT_EQ(seg_tuples(l.segments_of_shard(1)),
            (Tuples{{0, 8, 8, 2, 0}, {1, 0, 10, 6, 2}, {2, 7, 24, 8, 8}, {2, 19, 36, 1, 16}}));

  const ElementLocation loc = l.locate(2, 19);
  EXPECT_EQ(loc.flat_offset, 36);
  EXPECT_EQ(loc.bucket, 2);
  EXPECT_EQ(loc.rank, 1);
  EXPECT_EQ(loc.slice_offset, 0);
  EXPECT_EQ(loc.shard_offset, 16);
  EXPECT_EQ(l.element_at(37).param, -1);
  EXPECT_EQ(l.element_at(16).param, 1);
  EXPECT_EQ(l.element_at(16).element, 6);
  EXPECT_EQ(l.flat_offset_of_shard(1, 9), 25);  // bucket 1, rank 1 slice [24,32), 2nd element
  EXPECT_EQ(l.backward_bucket_order(), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(l.layer_buckets(0), (std::pair<int, int>{0, 2}));
  EXPECT_EQ(l.layer_buckets(1), (std::pair<int, int>{1, 3}));
  EXPECT_EQ(l.layer_buckets(7), (std::pair<int, int>{0, 0}));

  const std::string d = l.describe();
  EXPECT_NE(d.find("3 params, 37 elements in 3 buckets (40 with 3 padding)"), std::string::npos) << d;
  EXPECT_NE(d.find(" a b[0:6)\n"), std::string::npos) << d;
  EXPECT_NE(d.find(" b[6:7) c[0:15)\n"), std::string::npos) << d;
  EXPECT_NE(d.find(" c[15:20)\n"), std::string::npos) << d;
}

// The same params cut at layer groups: bucket 1 ends with b (layer 0) and is padded.
//   bucket 0 [0,16)  a[0:10) b[0:6)      bucket 2 [24,40) c[0:16)
//   bucket 1 [16,24) b[6:7) + 7 padding  bucket 3 [40,48) c[16:20) + 4 padding
TEST(LayoutClosedForm, CutAtLayerGroups) {
  const Layout l = make_ok(kAbc, 2, 4, 16, BucketBoundary::kLayerGroups);
  // {begin, size, payload, slice, first_param, last_param, layer_begin, layer_end}
  EXPECT_EQ(bucket_tuples(l), (Tuples{{0, 16, 16, 8, 0, 1, 0, 1},
                                      {16, 8, 1, 4, 1, 1, 0, 1},
                                      {24, 16, 16, 8, 2, 2, 1, 2},
                                      {40, 8, 4, 4, 2, 2, 1, 2}}));
  EXPECT_EQ(param_tuples(l), (Tuples{{0, 10, 0, 0}, {10, 7, 0, 1}, {24, 20, 2, 3}}));
  EXPECT_EQ(l.total_elems(), 48);
  EXPECT_EQ(l.shard_elems(), 24);
  EXPECT_EQ(l.layer_buckets(0), (std::pair<int, int>{0, 2}));
  EXPECT_EQ(l.layer_buckets(1), (std::pair<int, int>{2, 4}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(1, 0)), (Tuples{{1, 6, 16, 1, 8}}));
  EXPECT_TRUE(l.segments_in_slice(1, 1).empty());
  EXPECT_TRUE(l.segments_in_slice(3, 1).empty());  // [44,48) is all padding
  EXPECT_EQ(seg_tuples(l.segments_in_slice(3, 0)), (Tuples{{2, 16, 40, 4, 20}}));
}

// K=3, align 2, bucket_elems 13: quantum 6, so the capacity rounds up to 18.
//   bucket 0 [0,18)  p[0:18)             slices of 6
//   bucket 1 [18,30) p[18:25) + 5 pad    slices of 4: [18,22) p[18:22), [22,26) p[22:25), [26,30) empty
TEST(LayoutClosedForm, CapacityRoundsUpToKTimesAlign) {
  const Layout l = make_ok({{"p", {5, 5}, 0}}, 3, 2, 13);
  EXPECT_EQ(l.bucket_capacity(), 18);
  ASSERT_EQ(l.buckets().size(), 2u);
  EXPECT_EQ(l.buckets()[0].size, 18);
  EXPECT_EQ(l.buckets()[1].begin, 18);
  EXPECT_EQ(l.buckets()[1].size, 12);
  EXPECT_EQ(l.buckets()[1].payload, 7);
  EXPECT_EQ(l.shard_elems(), 10);
  EXPECT_EQ(l.shard_offset(1), 6);
  EXPECT_EQ(seg_tuples(l.segments_in_slice(1, 0)), (Tuples{{0, 18, 18, 4, 6}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(1, 1)), (Tuples{{0, 22, 22, 3, 6}}));
  EXPECT_TRUE(l.segments_in_slice(1, 2).empty());
  EXPECT_EQ(seg_tuples(l.segments_of_shard(2)), (Tuples{{0, 12, 12, 6, 0}}));
}

// One huge bucket, K=4, align 1: 11 elements padded to 12, slices of 3 that cut through params.
TEST(LayoutClosedForm, HugeBucketSlicesStraddleParams) {
  const Layout l = make_ok({{"x", {1}, 0}, {"y", {3}, 0}, {"z", {7}, 0}}, 4, 1, kHuge);
  ASSERT_EQ(l.buckets().size(), 1u);
  EXPECT_EQ(l.buckets()[0].size, 12);
  EXPECT_EQ(l.bucket_capacity() % 4, 0);
  EXPECT_EQ(seg_tuples(l.segments_in_slice(0, 0)), (Tuples{{0, 0, 0, 1, 0}, {1, 0, 1, 2, 1}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(0, 1)), (Tuples{{1, 2, 3, 1, 0}, {2, 0, 4, 2, 1}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(0, 2)), (Tuples{{2, 2, 6, 3, 0}}));
  EXPECT_EQ(seg_tuples(l.segments_in_slice(0, 3)), (Tuples{{2, 5, 9, 2, 0}}));
}

TEST(LayoutClosedForm, EmptyParamListIsAnEmptyLayout) {
  const Layout l = make_ok({}, 4, 16, 1000);
  EXPECT_EQ(l.total_elems(), 0);
  EXPECT_EQ(l.shard_elems(), 0);
  EXPECT_TRUE(l.buckets().empty());
  EXPECT_TRUE(l.segments_of_shard(3).empty());
  EXPECT_TRUE(l.backward_bucket_order().empty());
  EXPECT_EQ(l.layer_buckets(0), (std::pair<int, int>{0, 0}));
}

// A GPT-like stage-3 layout: every bucket belongs to one block and the blocks' bucket
// ranges tile the bucket list in order.
TEST(LayoutClosedForm, LayerGroupsTileTheBuckets) {
  std::vector<ParamSpec> specs = {{"wte", {97, 16}, 0}};
  for (int l = 1; l <= 4; ++l) {
    const std::string p = "blocks." + std::to_string(l - 1) + ".";
    specs.push_back({p + "ln.w", {16}, l});
    specs.push_back({p + "attn.w", {48, 16}, l});
    specs.push_back({p + "mlp.w", {64, 16}, l});
  }
  specs.push_back({"ln_f.w", {16}, 5});
  const Layout l = make_ok(specs, 4, 8, 500, BucketBoundary::kLayerGroups);
  int next = 0;
  for (int g = 0; g <= 5; ++g) {
    const auto [first, end] = l.layer_buckets(g);
    EXPECT_EQ(first, next) << "layer group " << g;
    EXPECT_GT(end, first) << "layer group " << g;
    for (int b = first; b < end; ++b) {
      EXPECT_EQ(l.buckets()[b].layer_begin, g);
      EXPECT_EQ(l.buckets()[b].layer_end, g + 1);
    }
    next = end;
  }
  EXPECT_EQ(next, static_cast<int>(l.buckets().size()));
}

// What checkpoints do: shards written at K=4 are re-sharded to K=2, 3 and 1 through
// name -> (param, element) -> new (rank, shard offset); every value lands where it belongs.
TEST(LayoutClosedForm, ReshardThroughParamNames) {
  const std::vector<ParamSpec> specs = {
      {"emb", {13, 7}, 0}, {"w1", {31}, 1}, {"b1", {1}, 1}, {"w2", {5, 19}, 2}, {"b2", {3}, 2}};
  auto value = [](int param, int64_t element) { return static_cast<float>(param * 1000 + element + 1); };
  const Layout from = make_ok(specs, 4, 4, 40, BucketBoundary::kLayerGroups);
  std::vector<std::vector<float>> shards(4, std::vector<float>(from.shard_elems(), 0.0f));
  for (int r = 0; r < 4; ++r) {
    for (const Segment& s : from.segments_of_shard(r)) {
      for (int64_t j = 0; j < s.length; ++j) shards[r][s.shard_offset + j] = value(s.param, s.param_offset + j);
    }
  }
  for (int k : {1, 2, 3}) {
    const Layout to = make_ok(specs, k, 2, 64);
    std::vector<std::vector<float>> out(k, std::vector<float>(to.shard_elems(), 0.0f));
    for (int r = 0; r < 4; ++r) {
      for (int64_t off = 0; off < from.shard_elems(); ++off) {
        const ParamElement pe = from.element_at(from.flat_offset_of_shard(r, off));
        if (pe.param < 0) {
          EXPECT_EQ(shards[r][off], 0.0f);  // padding
          continue;
        }
        const int dst = *to.find(from.params()[pe.param].name);
        const ElementLocation loc = to.locate(dst, pe.element);
        out[loc.rank][loc.shard_offset] = shards[r][off];
      }
    }
    for (int r = 0; r < k; ++r) {
      for (const Segment& s : to.segments_of_shard(r)) {
        for (int64_t j = 0; j < s.length; ++j) {
          ASSERT_EQ(out[r][s.shard_offset + j], value(s.param, s.param_offset + j))
              << "K=" << k << " rank " << r << " param " << s.param << " element " << s.param_offset + j;
        }
      }
    }
  }
}

// ---- Errors ----------------------------------------------------------------------------------

void expect_error(const std::vector<ParamSpec>& specs, const LayoutOptions& o, const std::string& needle) {
  StatusOr<Layout> l = make_layout(specs, o);
  ASSERT_FALSE(l.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find(needle), std::string::npos) << l.status().message();
}

LayoutOptions opts(int k = 2, int64_t bucket = 100, int64_t align = 4) {
  LayoutOptions o;
  o.world_size = k;
  o.bucket_elems = bucket;
  o.align_elems = align;
  return o;
}

TEST(LayoutErrors, BadParamsSayWhichAndWhy) {
  expect_error({{"a", {1}, 0}, {"", {2}, 0}}, opts(), "param #1 has an empty name");
  expect_error({{"a", {1}, 0}, {"b", {1}, 0}, {"a", {2}, 0}}, opts(), "param #2 'a' duplicates the name of param #0");
  expect_error({{"w", {4, 0, 3}, 0}}, opts(),
               "param #0 'w' has dimension 1 = 0 in shape [4, 0, 3]; every dimension must be >= 1");
  expect_error({{"w", {-2}, 0}}, opts(), "param #0 'w' has dimension 0 = -2 in shape [-2]");
  expect_error({{"s", {}, 0}}, opts(), "param #0 's' has an empty shape");
  expect_error(
      {{"a", {1}, 2}, {"b", {1}, 1}}, opts(),
      "param #1 'b' has layer group 1 after param #0 'a' in layer group 2: layer groups must be non-decreasing");
  expect_error({{"a", {1}, -1}}, opts(), "param #0 'a' has layer group -1; layer groups must be >= 0");
}

TEST(LayoutErrors, BadOptionsNameTheValue) {
  const std::vector<ParamSpec> one = {{"w", {8}, 0}};
  expect_error(one, opts(0), "world_size must be >= 1, got 0");
  expect_error(one, opts(-3), "world_size must be >= 1, got -3");
  expect_error(one, opts(2, 0), "bucket_elems must be >= 1, got 0");
  expect_error(one, opts(2, -5), "bucket_elems must be >= 1, got -5");
  expect_error(one, opts(2, 100, 0), "align_elems must be >= 1, got 0");
  expect_error(one, opts(2, 100, kHuge), "world_size (2) * align_elems (9223372036854775807) overflows int64");
}

TEST(LayoutErrors, Int64OverflowIsRefused) {
  const int64_t big = int64_t{1} << 32;
  expect_error({{"w", {big, big}, 0}}, opts(),
               "param #0 'w': the element count of shape [4294967296, 4294967296] overflows int64");
  const int64_t half = int64_t{1} << 62;
  expect_error({{"a", {half}, 0}, {"b", {half}, 0}}, opts(2, kHuge),
               "the total element count overflows int64 at param #1 'b'");
  // Fits unpadded, but padding the last bucket to a multiple of 4 passes INT64_MAX.
  expect_error({{"a", {kHuge - 1}, 0}}, opts(1, kHuge, 4), "the padded flat buffer overflows int64 at param #0 'a'");
  expect_error({{"a", {int64_t{1} << 40}, 0}}, opts(1, 1, 1), "need at least 2^31 - 1 buckets; raise bucket_elems");
}

TEST(LayoutErrors, LookupsOutOfRange) {
  const Layout l = make_ok(kAbc, 2, 4, 16);
  const StatusOr<int> missing = l.find("zz");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no parameter named 'zz'"), std::string::npos);
  EXPECT_THROW((void)l.slice_begin(3, 0), Error);
  EXPECT_THROW((void)l.slice_begin(0, 2), Error);
  EXPECT_THROW((void)l.segments_of_shard(-1), Error);
  EXPECT_THROW((void)l.locate(0, 10), Error);
  EXPECT_THROW((void)l.element_at(40), Error);
  EXPECT_THROW((void)l.flat_offset_of_shard(0, 20), Error);
  try {
    (void)l.shard_offset(7);
    FAIL() << "shard_offset(7) must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("Layout::shard_offset: bucket 7 is out of range [0, 3)"), std::string::npos)
        << e.status().message();
  }
}

}  // namespace
}  // namespace zdp
