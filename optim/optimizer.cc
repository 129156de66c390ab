// The sharded optimizer: options checks, per-step kernel arguments and dispatch to the
// CPU or CUDA fused kernels (see optim/optimizer.h).
#include "optim/optimizer.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>

namespace zdp::optim {

namespace {

Status check_options(const OptimizerOptions& o) {
  auto invalid = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, "optimizer: " + what); };
  if (!(o.lr >= 0.0) || !std::isfinite(o.lr)) return invalid("lr = " + std::to_string(o.lr) + " is not >= 0");
  if (o.kind == OptimizerKind::kAdamW) {
    const AdamWConfig& a = o.adamw;
    if (!(a.beta1 >= 0.0 && a.beta1 < 1.0)) return invalid("adamw beta1 = " + std::to_string(a.beta1) + " not in [0, 1)");
    if (!(a.beta2 >= 0.0 && a.beta2 < 1.0)) return invalid("adamw beta2 = " + std::to_string(a.beta2) + " not in [0, 1)");
    // The update runs in fp32: an eps that rounds to 0 there (1e-46 passed a check in
    // double) made 0 / 0 = NaN of every element whose moments are 0.
    char text[64];
    std::snprintf(text, sizeof(text), "%g", a.eps);
    if (!(a.eps >= FLT_MIN && a.eps <= FLT_MAX)) {
      return invalid(std::string("adamw eps = ") + text + " is not in fp32's normal range [1.17549e-38, 3.40282e+38]");
    }
  } else {
    const SgdConfig& s = o.sgd;
    if (!(s.momentum >= 0.0) || !std::isfinite(s.momentum)) {
      return invalid("sgd momentum = " + std::to_string(s.momentum) + " is not >= 0");
    }
    if (!(s.dampening >= 0.0 && s.dampening <= 1.0)) {
      return invalid("sgd dampening = " + std::to_string(s.dampening) + " not in [0, 1]");
    }
    if (s.kind == kernels::SgdMomentum::kNesterov && (s.momentum <= 0.0 || s.dampening != 0.0)) {
      return invalid("sgd nesterov needs momentum > 0 and dampening 0 (momentum = " + std::to_string(s.momentum) +
                     ", dampening = " + std::to_string(s.dampening) + ")");
    }
  }
  return o.schedule.validate();
}

}  // namespace

StatusOr<Optimizer> Optimizer::create(const OptimizerOptions& options, const std::vector<ParamExtent>& params) {
  ZDP_RETURN_IF_ERROR(check_options(options));
  ZDP_ASSIGN_OR_RETURN(const double peak,
                       scale_lr(options.lr, options.lr_scaling, options.base_batch, options.global_batch));
  ZDP_ASSIGN_OR_RETURN(ParamGroups groups, ParamGroups::create(options.weight_decay, options.groups));
  ZDP_ASSIGN_OR_RETURN(std::vector<kernels::DecaySegment> segments, groups.decay_segments(params));
  // Checked once here: the CUDA launcher reads the device copy without checking it.
  ZDP_RETURN_IF_ERROR(kernels::validate_segments(segments.data(), static_cast<int64_t>(segments.size())));
  return Optimizer(options, peak, std::move(segments));
}

kernels::SliceUpdateArgs Optimizer::slice_args(const SliceState& s, int64_t t, float grad_scale) const {
  kernels::SliceUpdateArgs a;
  a.count = s.count;
  a.global_offset = s.global_offset;
  a.master = s.master;
  a.grad = s.grad;
  a.grad_dtype = s.grad_dtype;
  a.param_out = s.param_out;
  a.param_dtype = s.param_dtype;
  a.rounding = options_.rounding;
  a.seed = options_.seed;
  a.step = t;
  a.lr = static_cast<float>(lr_at_step(t));
  a.weight_decay = static_cast<float>(options_.weight_decay);
  a.grad_scale = grad_scale;
  a.segments = segments_.data();
  a.num_segments = static_cast<int64_t>(segments_.size());
  a.decision = s.decision;
  a.alt_step = s.alt_step > 0 ? s.alt_step : t;
  a.alt_lr = static_cast<float>(lr_at_step(a.alt_step));
  return a;
}

kernels::AdamWArgs Optimizer::adamw_args(const SliceState& s, int64_t t, float grad_scale) const {
  kernels::AdamWArgs a;
  static_cast<kernels::SliceUpdateArgs&>(a) = slice_args(s, t, grad_scale);
  a.m = s.m;
  a.v = s.v;
  a.beta1 = static_cast<float>(options_.adamw.beta1);
  a.beta2 = static_cast<float>(options_.adamw.beta2);
  a.eps = static_cast<float>(options_.adamw.eps);
  return a;
}

kernels::SgdArgs Optimizer::sgd_args(const SliceState& s, int64_t t, float grad_scale) const {
  kernels::SgdArgs a;
  static_cast<kernels::SliceUpdateArgs&>(a) = slice_args(s, t, grad_scale);
  a.momentum_buf = s.m;
  a.momentum = static_cast<float>(options_.sgd.momentum);
  a.dampening = static_cast<float>(options_.sgd.dampening);
  a.kind = options_.sgd.kind;
  return a;
}

Status Optimizer::update(DeviceKind device, const SliceState& slice, int64_t t, float grad_scale,
                         const kernels::DecaySegment* device_segments, cudaStream_t stream) const {
  const bool cuda = device == DeviceKind::kCuda;
  if (cuda && !segments_.empty() && !device_segments) {
    return Status(StatusCode::kInvalidArgument,
                  "optimizer update on CUDA: the decay table (" + std::to_string(segments_.size()) +
                      " segments) has no device copy");
  }
  if (options_.kind == OptimizerKind::kAdamW) {
    kernels::AdamWArgs a = adamw_args(slice, t, grad_scale);
    if (!cuda) return kernels::adamw_update_cpu(a);
    a.segments = device_segments;
    return kernels::adamw_update_cuda(a, stream);
  }
  kernels::SgdArgs a = sgd_args(slice, t, grad_scale);
  if (!cuda) return kernels::sgd_update_cpu(a);
  a.segments = device_segments;
  return kernels::sgd_update_cuda(a, stream);
}

}  // namespace zdp::optim
