// write_initial_values (initial_values.h): rank 0 computes, everyone receives, a hash
// proves it.
#include "engine/src/initial_values.h"

#include <cmath>
#include <cstring>

#include "engine/src/host_collective.h"
#include "kernels/philox.h"

namespace zdp {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Element `i` of a parameter whose random stream is keyed by `key`: a pure function, so
// rank 0 can fill any bucket independently and the values never depend on the layout.
float init_value(const Init& init, uint64_t key, int64_t i) {
  switch (init.kind) {
    case Init::Kind::kZeros: return 0.0f;
    case Init::Kind::kConstant: return init.a;
    default: break;
  }
  const kernels::Philox4x32 r = kernels::random_group(key, 0, static_cast<uint64_t>(i));
  const double u1 = (static_cast<double>(r.v[0] >> 8) + 1.0) * 0x1p-24;  // (0, 1]: log is finite
  const double u2 = static_cast<double>(r.v[1] >> 8) * 0x1p-24;          // [0, 1)
  if (init.kind == Init::Kind::kUniform) return static_cast<float>(init.a + (init.b - init.a) * u2);
  const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);  // Box-Muller
  return static_cast<float>(init.b + init.a * normal);
}

}  // namespace

int64_t initial_values_staging_bytes(const Layout& layout) { return layout.max_bucket_elems() * 4; }

Status write_initial_values(EngineEnv& env, const EngineOptions& opt, const Layout& layout,
                            const ParamRegistry& registry, OptimizerState& state, ParamGatherer& params,
                            DeviceBuffer staging) {
  Device& device = env.device;
  Exec& exec = *env.exec;
  const std::string& who = env.who;
  const int rank = env.rank;
  const size_t num_params = static_cast<size_t>(registry.size());
  std::vector<uint64_t> keys(num_params), hashes(num_params, kFnvOffset);
  for (size_t p = 0; p < num_params; ++p) {
    const std::string& name = registry.at(static_cast<int>(p)).spec.name;
    keys[p] = fnv1a(kFnvOffset, name.data(), name.size()) ^ (static_cast<uint64_t>(opt.seed) * 0x9E3779B97F4A7C15ull);
  }
  std::vector<float> host(static_cast<size_t>(layout.max_bucket_elems()));
  for (int b = 0; b < static_cast<int>(layout.buckets().size()); ++b) {
    const Bucket& bk = layout.buckets()[static_cast<size_t>(b)];
    const std::string what = who + ": finalize: initial values of bucket " + std::to_string(b);
    if (rank == 0) {
      std::fill(host.begin(), host.begin() + bk.size, 0.0f);
      for (int p = bk.first_param; p <= bk.last_param; ++p) {
        const ParamPlacement& pl = layout.params()[static_cast<size_t>(p)];
        const int64_t lo = std::max(pl.offset, bk.begin), hi = std::min(pl.offset + pl.numel, bk.begin + bk.payload);
        for (int64_t x = lo; x < hi; ++x) {
          host[static_cast<size_t>(x - bk.begin)] =
              init_value(registry.at(p).init, keys[static_cast<size_t>(p)], x - pl.offset);
        }
      }
      ZDP_RETURN_IF_ERROR(device.memcpy(staging.data(), host.data(), static_cast<size_t>(bk.size) * 4));
    }
    ZDP_RETURN_IF_ERROR(env.comm.broadcast(staging.data(), bk.size, DType::kF32, 0, exec.comm(), b));
    ZDP_RETURN_IF_ERROR(exec.synchronize(what));
    if (rank != 0) ZDP_RETURN_IF_ERROR(device.memcpy(host.data(), staging.data(), static_cast<size_t>(bk.size) * 4));
    for (int p = bk.first_param; p <= bk.last_param; ++p) {
      const ParamPlacement& pl = layout.params()[static_cast<size_t>(p)];
      const int64_t lo = std::max(pl.offset, bk.begin), hi = std::min(pl.offset + pl.numel, bk.begin + bk.payload);
      hashes[static_cast<size_t>(p)] = fnv1a(hashes[static_cast<size_t>(p)], &host[static_cast<size_t>(lo - bk.begin)],
                                             static_cast<size_t>(hi - lo) * 4);
    }
    // Scatter the bucket into this rank's buffers: the owned range of the fp32 masters,
    // and the compute-dtype parameters (all of them, or the owned slice at stage 3).
    const OwnedRange o = owned_range(layout, opt, rank, b);
    const float* src = staging.as<float>();
    ZDP_RETURN_IF_ERROR(exec.copy(state.master() + o.state, src + (o.flat - bk.begin), o.count * 4));
    kernels::CastArgs cast{src, DType::kF32, nullptr, opt.compute_dtype, bk.size};
    if (!opt.zero.shards_params()) {
      // The whole bucket: the all-gather after a step writes all of it too.
      cast.dst = params.owned(OwnedRange{bk.begin, bk.size, 0});
    } else {
      cast.src = src + (o.flat - bk.begin);
      cast.dst = params.owned(o);
      cast.count = o.count;
    }
    ZDP_RETURN_IF_ERROR(exec.cast(cast));
    ZDP_RETURN_IF_ERROR(exec.synchronize(what));  // the staging buffer is refilled next
  }

  // Equal on every rank iff max over ranks of h equals min (= -max of -h); 62 bits keep
  // the negation exact.
  std::vector<int64_t> both(2 * num_params);
  for (size_t p = 0; p < num_params; ++p) {
    const int64_t h = static_cast<int64_t>(hashes[p] >> 2);
    both[p] = h;
    both[num_params + p] = -h;
  }
  ZDP_RETURN_IF_ERROR(all_reduce_i64(env, both, ReduceOp::kMax, "finalize: value hash check"));
  for (size_t p = 0; p < num_params; ++p) {
    if (both[p] != -both[num_params + p]) {
      return Status(StatusCode::kInternal, who + ": finalize: parameter #" + std::to_string(p) + " " +
                                               registry.label(static_cast<int>(p)) +
                                               " differs between ranks after the broadcast from rank 0 "
                                               "(hash check of the received values)");
    }
  }
  return Status::Ok();
}

}  // namespace zdp
