// zdp::Engine: the public API, option checks and the finalize() sequence; the work itself
// lives in the other engine*.cc files (see engine_impl.h).
#include <atomic>
#include <cmath>

#include "engine/src/engine_impl.h"
#include "zdp/log.h"

namespace zdp {

const char* to_string(Decay decay) {
  switch (decay) {
    case Decay::kByName: return "by-name";
    case Decay::kDecay: return "decay";
    case Decay::kNoDecay: return "no-decay";
  }
  return "?";
}

StatusOr<EngineOptions> EngineOptions::from(const Config& config, int world_size) {
  ZDP_RETURN_IF_ERROR(validate_for_world(config, world_size));
  EngineOptions o;
  o.stage = config.zero.stage;
  o.bucket_mb = config.zero.bucket_mb;
  o.compute_dtype = config.model.dtype;
  o.reduce_dtype = config.zero.reduce_dtype;
  o.overlap = config.zero.overlap;
  o.prefetch_layers = config.zero.prefetch_layers;
  o.accumulate = config.zero.accumulate;
  o.accum_steps = resolved_accum_steps(config.train, world_size);
  o.optim = config.optim;
  o.total_steps = config.train.steps;
  o.global_batch = config.train.global_batch;
  o.seed = config.train.seed;
  o.trace = config.profile.enabled;
  // The batch-size rule is applied here, once: the options carry the scaled lr and min_lr
  // and no rule, so code that reads o.optim.lr sees the rate the run uses.
  if (o.optim.lr_scaling != LrScalingRule::kNone) {
    const int64_t base = o.optim.base_batch > 0 ? o.optim.base_batch : o.global_batch;
    const optim::LrScaling rule = lr_scaling_of(o.optim.lr_scaling);
    StatusOr<double> lr = optim::scale_lr(o.optim.lr, rule, base, o.global_batch);
    StatusOr<double> min_lr = optim::scale_lr(o.optim.min_lr, rule, base, o.global_batch);
    if (!lr.ok() || !min_lr.ok()) return (lr.ok() ? min_lr.status() : lr.status()).with_context(config.source);
    o.optim.lr = *lr;
    o.optim.min_lr = *min_lr;
    o.optim.lr_scaling = LrScalingRule::kNone;
    o.optim.base_batch = 0;
  }
  Status s = o.validate();
  if (!s.ok()) return s.with_context(config.source);
  return o;
}

Status EngineOptions::validate() const {
  std::string problems;
  auto bad = [&](const std::string& what) { problems += (problems.empty() ? "" : "\n") + what; };
  if (stage < 0 || stage > 3) bad("stage " + std::to_string(stage) + " is not one of 0, 1, 2, 3");
  if (!(bucket_mb > 0) || !std::isfinite(bucket_mb)) bad("bucket_mb " + std::to_string(bucket_mb) + " is not > 0");
  if (compute_dtype != DType::kF32 && compute_dtype != DType::kBF16 && compute_dtype != DType::kF16) {
    bad(std::string("compute dtype ") + to_string(compute_dtype) + " is not fp32, bf16 or fp16");
  }
  if (reduce_dtype != DType::kF32 && reduce_dtype != DType::kBF16) {
    bad(std::string("reduce dtype ") + to_string(reduce_dtype) + " is not fp32 or bf16");
  }
  if (accum_steps < 1) bad("accum_steps " + std::to_string(accum_steps) + " is not >= 1");
  if (prefetch_layers < 0) bad("prefetch_layers " + std::to_string(prefetch_layers) + " is not >= 0");
  if (accumulate == GradAccumulation::kSharded && (stage == 0 || stage == 1)) {
    bad("accumulate sharded needs stage 2 or 3 (the gradient shard it accumulates into); stage is " +
        std::to_string(stage));
  }
  if (!(optim.grad_clip >= 0)) bad("grad_clip " + std::to_string(optim.grad_clip) + " is not >= 0");
  if (optim.lr_scaling != LrScalingRule::kNone && global_batch < 1) {
    bad(std::string("lr_scaling ") + to_string(optim.lr_scaling) + " needs global_batch (the batch the lr scales to)");
  }
  const LossScaleOptions& ls = loss_scale;
  Status scaler = optim::DynamicLossScale::create(
                      {ls.initial, ls.growth_factor, ls.backoff, ls.growth_interval, ls.min_scale})
                      .status();
  if (!scaler.ok()) bad(scaler.message());
  if (problems.empty()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, "engine options: " + problems);
}

Engine::Impl::Impl(Context& context, EngineOptions options)
    : ctx(context),
      device(context.device()),
      comm(context.comm()),
      rank(context.rank()),
      world(context.world_size()),
      opt(std::move(options)),
      who("rank " + std::to_string(context.rank())),
      timeout(context.collective_timeout()) {
  static std::atomic<int> engines{0};
  instance = engines++;
}

std::string Engine::Impl::param_label(int p) const {
  const ParamSpec& s = registered[static_cast<size_t>(p)].spec;
  return "'" + s.name + "' " + shape_to_string(s.shape);
}

Status Engine::Impl::invalid(const std::string& what) const {
  return Status(StatusCode::kInvalidArgument, who + ": " + what);
}

Status Engine::Impl::fail(const Status& status) {
  if (failure.ok()) failure = status;
  return failure;
}

bool Engine::Impl::view_allowed(const char* call, int p) {
  if (!failure.ok()) return false;
  if (finalized && p >= 0 && p < static_cast<int>(registered.size())) return true;
  defer(invalid(std::string(call) + "(#" + std::to_string(p) + "): " + (finalized ? "no such parameter" : "before finalize()")));
  return false;
}

OwnedRange Engine::Impl::owned(int b) const {
  const Bucket& bk = bucket(b);
  if (opt.stage == 0) return {bk.begin, bk.size, bk.begin};
  return {layout.slice_begin(b, rank), bk.slice_size(), layout.shard_offset(b)};
}

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Engine::Impl::trace(TimelineEvent::Kind kind, int b, CollectiveOp op, int64_t bytes) {
  if (!opt.trace) return;
  TimelineEvent e{kind, b, calls, 0.0, op, bytes};
  // A failure to enqueue only loses a trace point; the collective's own enqueue reports it.
  (void)exec->comm().enqueue_host("trace", [this, e]() mutable {
    e.seconds = steady_seconds();
    std::lock_guard<std::mutex> lock(timeline_mu);
    timeline.push_back(e);
    return Status::Ok();
  });
}

void Engine::Impl::stamp(TimelineEvent::Kind kind, int b, CollectiveOp op) {
  if (!opt.trace || !exec) return;
  TimelineEvent e{kind, b, kind == TimelineEvent::Kind::kIterationEnd ? calls - 1 : calls, 0.0, op};
  if (!exec->cuda()) {
    e.seconds = steady_seconds();
    std::lock_guard<std::mutex> lock(timeline_mu);
    timeline.push_back(e);
    return;
  }
  (void)exec->compute().enqueue_host("trace", [this, e]() mutable {
    e.seconds = steady_seconds();
    std::lock_guard<std::mutex> lock(timeline_mu);
    timeline.push_back(e);
    return Status::Ok();
  });
}

// ---- Engine ------------------------------------------------------------------------

Engine::Engine(Context& ctx, EngineOptions options) : impl_(std::make_unique<Impl>(ctx, std::move(options))) {}

Engine::~Engine() {
  if (!impl_ || !impl_->exec) return;
  // Queued work points into the buffers: drain it, then stop the streams before the
  // buffers go (members die in reverse order, buffers before the streams).
  Status s = impl_->exec->synchronize(impl_->who + ": engine teardown");
  if (!s.ok()) ZDP_LOG(kWarn) << s.to_string();
  impl_->exec.reset();
}

StatusOr<Param> Engine::add_param(const std::string& name, const std::vector<int64_t>& shape, Init init, int layer,
                                  Decay decay) {
  Impl& m = *impl_;
  if (m.finalized) return m.invalid("add_param('" + name + "'): the engine is finalized already");
  if (!m.registered.empty() && layer < m.registered.back().spec.layer) {
    return m.invalid("add_param('" + name + "'): layer group " + std::to_string(layer) + " after '" +
                     m.registered.back().spec.name + "' in layer group " + std::to_string(m.registered.back().spec.layer) +
                     " (layer groups must not decrease in registration order)");
  }
  for (size_t i = 0; i < m.registered.size(); ++i) {
    if (m.registered[i].spec.name == name) {
      return m.invalid("add_param('" + name + "'): the name is taken by parameter #" + std::to_string(i));
    }
  }
  m.registered.push_back(Registration{ParamSpec{name, shape, layer}, init, decay});
  return Param{static_cast<int>(m.registered.size()) - 1};
}

Status Engine::finalize() {
  Impl& m = *impl_;
  if (m.finalized) return m.invalid("finalize(): called twice");
  ZDP_RETURN_IF_ERROR(m.failure);
  Status valid = m.opt.validate();
  if (!valid.ok()) return valid.with_context(m.who + ": finalize");
  // Host waits outlast the collective timeout, so a collective's own error comes first.
  ZDP_ASSIGN_OR_RETURN(m.exec, Exec::create(m.device, m.timeout + std::chrono::seconds(30)));
  ZDP_RETURN_IF_ERROR(m.check_registration());
  Status built = m.build_layout();
  if (built.ok()) built = m.build_optimizer();
  if (built.ok()) built = m.allocate();
  // Every rank learns whether any rank failed here, so none waits for a peer that left.
  int64_t failed = built.ok() ? 0 : 1;
  ZDP_RETURN_IF_ERROR(m.comm.all_reduce(&failed, &failed, 1, DType::kI64, ReduceOp::kMax, m.exec->comm()));
  ZDP_RETURN_IF_ERROR(m.exec->synchronize(m.who + ": finalize"));
  if (!built.ok()) return m.fail(built.with_context(m.who + ": finalize"));
  if (failed) {
    return m.fail(Status(StatusCode::kAborted,
                         m.who + ": finalize: another rank failed to build its layout or buffers (see its log)"));
  }
  ZDP_RETURN_IF_ERROR(m.fail(m.init_values()));
  m.finalized = true;
  m.reset_step_state();
  if (m.rank == 0) {
    ZDP_LOG(kInfo) << "engine: stage " << m.opt.stage << ", " << m.registered.size() << " parameters ("
                   << m.layout.payload_elems() << " elements) in " << m.num_buckets() << " buckets, world "
                   << m.world << "\n"
                   << memory().table();
  }
  return Status::Ok();
}

int64_t Engine::accum_steps() const { return impl_->opt.accum_steps; }
const EngineOptions& Engine::options() const { return impl_->opt; }
int Engine::rank() const { return impl_->rank; }
int Engine::world_size() const { return impl_->world; }
Stream& Engine::compute_stream() { return impl_->exec->compute(); }
MemoryReport Engine::memory() const { return impl_->memory_report(); }
std::string Engine::describe_layout() const { return impl_->finalized ? impl_->layout.describe() : std::string(); }

std::vector<std::string> Engine::param_names() const {
  std::vector<std::string> names;
  for (const Registration& r : impl_->registered) names.push_back(r.spec.name);
  return names;
}

Status Engine::error() const { return impl_->failure; }
double Engine::loss_scale() const { return impl_->scaler ? impl_->scaler->scale() : 1.0; }

void* Engine::param(Param p) { return impl_->param_ptr(p.index); }
void* Engine::grad(Param p) { return impl_->grad_ptr(p.index); }
Status Engine::grad_ready(Param p) { return impl_->grad_ready(p.index); }
StatusOr<StepStats> Engine::step() { return impl_->step(); }
StatusOr<std::vector<float>> Engine::gather_master(Param p) { return impl_->gather_master(p.index); }

StatusOr<std::vector<TimelineEvent>> Engine::timeline() {
  Impl& m = *impl_;
  if (!m.opt.trace) return m.invalid("timeline(): EngineOptions::trace is off");
  if (!m.exec) return std::vector<TimelineEvent>{};
  Status s = m.exec->comm().synchronize(m.timeout);
  if (!s.ok()) return s.with_context(m.who + ": timeline()");
  std::lock_guard<std::mutex> lock(m.timeline_mu);
  return m.timeline;
}

std::vector<TimelineEvent> Engine::take_timeline() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.timeline_mu);
  std::vector<TimelineEvent> out;
  out.swap(m.timeline);
  return out;
}

Status Engine::mark(TimelineEvent::Kind kind) {
  Impl& m = *impl_;
  if (kind < TimelineEvent::Kind::kIterationBegin || kind > TimelineEvent::Kind::kIterationEnd) {
    return m.invalid("mark(): kind " + std::to_string(static_cast<int>(kind)) +
                     " is one of the engine's own timeline points, not a trainer's");
  }
  m.stamp(kind);
  return Status::Ok();
}

StatusOr<Engine::LayerScope> Engine::layer(int layer, Pass pass) {
  Impl& m = *impl_;
  if (!m.finalized) return m.invalid("layer(" + std::to_string(layer) + "): before finalize()");
  ZDP_RETURN_IF_ERROR(m.failure);
  if (m.opt.stage < 3) return LayerScope();
  ZDP_RETURN_IF_ERROR(m.enter_layer(layer, pass));
  return LayerScope(this, layer);
}

void Engine::end_scope(int layer) { impl_->exit_layer(layer); }

Engine::LayerScope::LayerScope(LayerScope&& other) noexcept : engine_(other.engine_), layer_(other.layer_) {
  other.engine_ = nullptr;
}

Engine::LayerScope& Engine::LayerScope::operator=(LayerScope&& other) noexcept {
  if (this != &other) {
    if (engine_) engine_->end_scope(layer_);
    engine_ = other.engine_;
    layer_ = other.layer_;
    other.engine_ = nullptr;
  }
  return *this;
}

Engine::LayerScope::~LayerScope() {
  if (engine_) engine_->end_scope(layer_);
}

}  // namespace zdp
