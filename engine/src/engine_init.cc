// finalize()'s agreement steps: every rank registered the same parameters (checked
// against rank 0's list through the store, so the message can name both sides), rank 0
// computes the initial values and broadcasts them bucket by bucket (memory stays one
// bucket, even at stage 3), and a per-parameter hash across ranks proves that every
// rank received the same bytes.
#include <cmath>
#include <cstring>
#include <sstream>

#include "engine/src/engine_impl.h"
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

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

Status Engine::Impl::check_registration() {
  // Entry 0 is the options that shape the layout; entry i + 1 is parameter i.
  std::vector<std::string> mine;
  mine.push_back("options: stage " + std::to_string(opt.stage) + ", compute " + to_string(cdt()) + ", reduce " +
                 to_string(rdt()) + ", accum_steps " + std::to_string(opt.accum_steps) + ", bucket_mb " +
                 std::to_string(opt.bucket_mb));
  for (size_t i = 0; i < registered.size(); ++i) {
    const Registration& r = registered[i];
    mine.push_back(param_label(static_cast<int>(i)) + " layer " + std::to_string(r.spec.layer) + " decay " +
                   to_string(r.decay));
  }
  if (world == 1) return Status::Ok();

  PrefixStore store("zdp/engine/" + std::to_string(instance), ctx.store());
  std::string joined;
  for (const std::string& line : mine) joined += line + "\n";
  if (rank == 0) ZDP_RETURN_IF_ERROR(store.set("registration", joined));
  StatusOr<std::string> theirs_text = store.get("registration", timeout);
  if (!theirs_text.ok()) return theirs_text.status().with_context(who + ": finalize: rank 0's parameter list");
  const std::vector<std::string> theirs = split_lines(*theirs_text);

  auto entry = [](const std::vector<std::string>& list, size_t i) {
    return i < list.size() ? list[i] : "nothing (" + std::to_string(list.size() - 1) + " parameters in all)";
  };
  int64_t diff = -1;
  for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    if (i >= mine.size() || i >= theirs.size() || mine[i] != theirs[i]) {
      diff = static_cast<int64_t>(i);
      break;
    }
  }
  if (diff >= 0) ZDP_RETURN_IF_ERROR(store.set("differs/" + std::to_string(rank), entry(mine, static_cast<size_t>(diff))));

  // Every rank learns which ranks differ, and where, so all of them stop with one story.
  std::vector<int64_t> where(static_cast<size_t>(world), 0);
  where[static_cast<size_t>(rank)] = diff + 1;
  ZDP_RETURN_IF_ERROR(comm.all_reduce(where.data(), where.data(), world, DType::kI64, ReduceOp::kSum, exec->comm()));
  ZDP_RETURN_IF_ERROR(exec->synchronize(who + ": finalize: registration check"));
  for (int q = 0; q < world; ++q) {
    const int64_t d = where[static_cast<size_t>(q)] - 1;
    if (d < 0) continue;
    StatusOr<std::string> other = store.get("differs/" + std::to_string(q), timeout);
    const std::string theirs_entry = other.ok() ? *other : "(unknown: " + other.status().message() + ")";
    const std::string what = d == 0 ? "engine options differ between ranks"
                                    : "parameter registration differs between ranks at parameter #" +
                                          std::to_string(d - 1);
    return Status(StatusCode::kInvalidArgument, who + ": finalize: " + what + ": rank 0 has " +
                                                    entry(theirs, static_cast<size_t>(d)) + ", rank " +
                                                    std::to_string(q) + " has " + theirs_entry);
  }
  return Status::Ok();
}

Status Engine::Impl::init_values() {
  const size_t num_params = registered.size();
  std::vector<uint64_t> keys(num_params), hashes(num_params, kFnvOffset);
  for (size_t p = 0; p < num_params; ++p) {
    const std::string& name = registered[p].spec.name;
    keys[p] = fnv1a(kFnvOffset, name.data(), name.size()) ^ (static_cast<uint64_t>(opt.seed) * 0x9E3779B97F4A7C15ull);
  }
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer staging,
                       device.allocate(layout.max_bucket_elems() * 4, MemCategory::kWorkspace));
  std::vector<float> host(static_cast<size_t>(layout.max_bucket_elems()));
  for (int b = 0; b < num_buckets(); ++b) {
    const Bucket& bk = bucket(b);
    const std::string what = who + ": finalize: initial values of bucket " + std::to_string(b);
    if (rank == 0) {
      std::fill(host.begin(), host.begin() + bk.size, 0.0f);
      for (int p = bk.first_param; p <= bk.last_param; ++p) {
        const ParamPlacement& pl = placement(p);
        const int64_t lo = std::max(pl.offset, bk.begin), hi = std::min(pl.offset + pl.numel, bk.begin + bk.payload);
        for (int64_t x = lo; x < hi; ++x) {
          host[static_cast<size_t>(x - bk.begin)] = init_value(registered[static_cast<size_t>(p)].init,
                                                               keys[static_cast<size_t>(p)], x - pl.offset);
        }
      }
      ZDP_RETURN_IF_ERROR(device.memcpy(staging.data(), host.data(), static_cast<size_t>(bk.size) * 4));
    }
    ZDP_RETURN_IF_ERROR(comm.broadcast(staging.data(), bk.size, DType::kF32, 0, exec->comm(), b));
    ZDP_RETURN_IF_ERROR(exec->synchronize(what));
    if (rank != 0) ZDP_RETURN_IF_ERROR(device.memcpy(host.data(), staging.data(), static_cast<size_t>(bk.size) * 4));
    for (int p = bk.first_param; p <= bk.last_param; ++p) {
      const ParamPlacement& pl = placement(p);
      const int64_t lo = std::max(pl.offset, bk.begin), hi = std::min(pl.offset + pl.numel, bk.begin + bk.payload);
      hashes[static_cast<size_t>(p)] = fnv1a(hashes[static_cast<size_t>(p)], &host[static_cast<size_t>(lo - bk.begin)],
                                             static_cast<size_t>(hi - lo) * 4);
    }
    // Scatter the bucket into this rank's buffers: the owned range of the fp32 masters,
    // and the compute-dtype parameters (all of them, or the owned slice at stage 3).
    const OwnedRange o = owned(b);
    const float* src = staging.as<float>();
    ZDP_RETURN_IF_ERROR(exec->copy(master.as<float>() + o.state, src + (o.flat - bk.begin), o.count * 4));
    kernels::CastArgs cast{src, DType::kF32, nullptr, cdt(), bk.size};
    if (opt.stage < 3) {
      cast.dst = elem_ptr(params_full.data(), bk.begin, cdt());
    } else {
      cast.src = src + (o.flat - bk.begin);
      cast.dst = elem_ptr(params_shard.data(), o.state, cdt());
      cast.count = o.count;
    }
    ZDP_RETURN_IF_ERROR(exec->cast(cast));
    ZDP_RETURN_IF_ERROR(exec->synchronize(what));  // the staging buffer is refilled next
  }

  // Equal on every rank iff max over ranks of h equals min (= -max of -h); 62 bits keep
  // the negation exact.
  std::vector<int64_t> both(2 * num_params);
  for (size_t p = 0; p < num_params; ++p) {
    const int64_t h = static_cast<int64_t>(hashes[p] >> 2);
    both[p] = h;
    both[num_params + p] = -h;
  }
  ZDP_RETURN_IF_ERROR(comm.all_reduce(both.data(), both.data(), static_cast<int64_t>(both.size()), DType::kI64,
                                      ReduceOp::kMax, exec->comm()));
  ZDP_RETURN_IF_ERROR(exec->synchronize(who + ": finalize: value hash check"));
  for (size_t p = 0; p < num_params; ++p) {
    if (both[p] != -both[num_params + p]) {
      return Status(StatusCode::kInternal, who + ": finalize: parameter #" + std::to_string(p) + " " +
                                               param_label(static_cast<int>(p)) +
                                               " differs between ranks after the broadcast from rank 0 "
                                               "(hash check of the received values)");
    }
  }
  return Status::Ok();
}

}  // namespace zdp
