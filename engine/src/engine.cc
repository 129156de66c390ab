// zdp::Engine: the public API and the finalize() sequence; the work itself lives in the
// named parts (engine_impl.h).
#include "engine/src/buffer_plan.h"
#include "engine/src/engine_impl.h"
#include "engine/src/host_collective.h"
#include "engine/src/initial_values.h"
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

Status Engine::Impl::build() {
  StatusOr<Layout> made = make_layout(registry.specs(), engine_layout_options(opt, env.world));
  if (!made.ok()) return made.status().with_context("layout");
  layout = std::move(*made);
  ZDP_RETURN_IF_ERROR(check_layout_for_options(layout, opt));
  ZDP_ASSIGN_OR_RETURN(state, OptimizerState::create(env, opt, layout, registry));
  quant = std::make_unique<QuantizedExchange>(env, opt, layout, timeline,
                                              [s = state.get()] { return s->loss_scale(); });
  ZDP_ASSIGN_OR_RETURN(grads, GradReducer::create(env, opt, layout, registry, timeline, *quant));
  ZDP_ASSIGN_OR_RETURN(params, ParamGatherer::create(env, opt, layout, timeline, *quant));
  // Every size comes from plan_buffers(), the rules plan_memory() reports (buffer_plan.h).
  const BufferSizes sizes = plan_buffers(layout, opt, env.device.kind());
  ZDP_RETURN_IF_ERROR(params->allocate(sizes));
  ZDP_RETURN_IF_ERROR(grads->allocate(sizes));
  ZDP_RETURN_IF_ERROR(state->allocate(sizes));
  ZDP_RETURN_IF_ERROR(quant->allocate(sizes));
  return env.exec->synchronize(env.who + ": buffer initialisation");
}

bool Engine::Impl::view_allowed(const char* call, int p) {
  if (!env.failure.ok()) return false;
  if (const Status alive = env.context_alive(call); !alive.ok()) {
    env.defer(alive);
    return false;
  }
  if (finalized && registry.valid(p)) return true;
  env.defer(env.invalid(std::string(call) + "(#" + std::to_string(p) +
                        "): " + (finalized ? "no such parameter" : "before finalize()")));
  return false;
}

Status Engine::Impl::require_between_steps(const char* call, Status* misuse) {
  ZDP_RETURN_IF_ERROR(env.context_alive(call));
  if (!finalized) return env.invalid(std::string(call) + ": before finalize()");
  ZDP_RETURN_IF_ERROR(env.failure.status());
  Status problem;
  const int open = params->open_scope();
  if (grads->micro() != 0 || grads->ready_count() != 0) {
    problem = env.invalid(std::string(call) + ": inside a step (" + std::to_string(grads->micro()) +
                          " micro-batches done, " + std::to_string(grads->ready_count()) +
                          " gradients marked ready): call it between step() and the next forward");
  } else if (open >= 0) {
    problem = env.invalid(std::string(call) + ": inside a scope of layer group " + std::to_string(open) +
                          " (end it first)");
  }
  if (!problem.ok()) {
    if (misuse == nullptr) return problem;
    *misuse = problem;
    return Status::Ok();
  }
  // Checkpoints save and restore the step count and the loss scale: learn every step's outcome.
  return env.failure.fail(state->settle(0, env.who + ": " + call));
}

std::string Engine::Impl::next_checkpoint_prefix(const char* op) {
  return "zdp/engine/" + std::to_string(env.instance) + "/checkpoint/" + std::to_string(checkpoint_ops++) + "-" + op;
}

// ---- Engine ------------------------------------------------------------------------

Engine::Engine(Context& ctx, EngineOptions options) : impl_(std::make_unique<Impl>(ctx, std::move(options))) {}

Engine::~Engine() {
  if (impl_ && impl_->env.ctx_life.expired()) {
    // Its buffers, streams and events belong to a device that is gone: freeing them there
    // crashed at exit. They are left as they are (a leak, said once) instead.
    ZDP_LOG(kError) << impl_->env.who << ": an engine outlived its Context (destroyed or moved from first); its "
                    << "buffers are not freed: destroy engines before their context";
    // Layer scopes that outlive the engine must see it gone (they end nothing then): the
    // token they watch is destroyed here, the rest left.
    impl_->scope_token.reset();
    (void)impl_.release();
    return;
  }
  if (impl_ && impl_->params && impl_->params->open_scopes() > 0) {
    ZDP_LOG(kWarn) << impl_->env.who << ": the engine ends with " << impl_->params->open_scopes()
                   << " layer scope(s) still open; they will end nothing";
  }
  if (!impl_ || !impl_->env.exec) return;
  // Queued work points into the buffers: drain it, then stop the streams before the
  // parts (and their buffers) go.
  Status s = impl_->env.exec->synchronize(impl_->env.who + ": engine teardown");
  if (!s.ok()) ZDP_LOG(kWarn) << s.to_string();
  impl_->env.exec.reset();
}

StatusOr<Param> Engine::add_param(const std::string& name, const std::vector<int64_t>& shape, Init init, int layer,
                                  Decay decay) {
  Impl& m = *impl_;
  ZDP_RETURN_IF_ERROR(m.env.context_alive("add_param()"));
  if (m.finalized) return m.env.invalid("add_param('" + name + "'): the engine is finalized already");
  return m.registry.add(m.env, name, shape, init, layer, decay);
}

Status Engine::finalize() {
  Impl& m = *impl_;
  EngineEnv& env = m.env;
  ZDP_RETURN_IF_ERROR(env.context_alive("finalize()"));
  if (m.finalized) return env.invalid("finalize(): called twice");
  // A context assembled by a trainer's own bootstrap (Context::assemble) must describe its
  // communicator: a default LaunchEnv (rank 0 of 1) around a 2-rank communicator laid out
  // buffers for one rank that the collectives then ran over two (out of bounds at stages
  // 1-3, gradients doubled at stage 0).
  if (env.comm.rank() != env.rank || env.comm.world_size() != env.world || &env.comm.device() != &env.device) {
    return env.invalid("finalize(): the Context says rank " + std::to_string(env.rank) + " of " +
                       std::to_string(env.world) + " and its communicator rank " + std::to_string(env.comm.rank()) +
                       " of " + std::to_string(env.comm.world_size()) +
                       (&env.comm.device() != &env.device ? ", on another device" : "") +
                       " (Context::assemble: the LaunchEnv must be the communicator's)");
  }
  // A finalize() that failed after its agreement may have broken the communicator: another
  // one returns its failure, not a registration check no peer joins. (One that failed
  // before it failed on every rank alike: a second call meets the others' again.)
  if (m.past_agreement && !env.failure.ok()) return env.failure.status();
  // This engine's number among the engines finalized on every rank: its store keys. A
  // count of engines constructed per process diverged when one rank built an engine it
  // never finalized, and every later finalize() waited out the timeout. Finalizes are
  // collective and end with a collective, so the arrivals of one do not mix with the next's.
  ZDP_ASSIGN_OR_RETURN(const int64_t arrival, env.ctx.store().add("zdp/engine/finalize_arrivals", 1));
  env.instance = static_cast<int>((arrival - 1) / env.world);
  // Invalid options on one rank, or a failure it deferred before (a view asked for before
  // finalize()), are every rank's error: the registration check
  // names the rank, where returning here left the others waiting out the timeout.
  Status valid = env.failure.ok() ? m.opt.validate() : env.failure.status();
  // Nothing to step: a micro-batch ends when its last gradient is ready, and there is none.
  if (valid.ok() && m.registry.size() == 0) valid = env.invalid("finalize(): no parameters were added (add_param)");
  // Host waits outlast the collective timeout, so a collective's own error comes first.
  ZDP_ASSIGN_OR_RETURN(env.exec, Exec::create(env.device, env.timeout + std::chrono::seconds(30), &env.comm));
  ZDP_RETURN_IF_ERROR(m.timeline.attach(*env.exec));
  ZDP_RETURN_IF_ERROR(m.registry.check_same_on_every_rank(env, m.opt, valid));
  if (!valid.ok()) return valid.with_context(env.who + ": finalize");
  Status built = m.build();
  // The initial values' staging too: every allocation of finalize() happens before the
  // agreement below.
  DeviceBuffer staging;
  if (built.ok()) {
    StatusOr<DeviceBuffer> made = env.device.allocate(initial_values_staging_bytes(m.layout), MemCategory::kWorkspace);
    if (made.ok()) staging = std::move(*made);
    else built = made.status().with_context("initial values' staging");
  }
  // Every rank learns whether any rank failed here, so none waits for a peer that left.
  std::vector<int64_t> failed = {built.ok() ? 0 : 1};
  m.past_agreement = true;
  ZDP_RETURN_IF_ERROR(env.failure.fail(all_reduce_i64(env, failed, ReduceOp::kMax, "finalize")));
  if (!built.ok()) return env.failure.fail(built.with_context(env.who + ": finalize"));
  if (failed[0] != 0) {
    return env.failure.fail(Status(StatusCode::kAborted, env.who + ": finalize: another rank failed to build its "
                                                                   "layout or buffers (see its log)"));
  }
  // After the failure flag: a collective every rank reaches, and whose verdict (the node
  // map) every rank computes alike.
  ZDP_RETURN_IF_ERROR(env.failure.fail(m.quant->setup_nodes()));
  ZDP_RETURN_IF_ERROR(env.failure.fail(write_initial_values(env, m.opt, m.layout, m.registry, *m.state, *m.params,
                                                            std::move(staging))));
  m.finalized = true;
  m.grads->reset_step();
  if (env.rank == 0) {
    ZDP_LOG(kInfo) << "engine: stage " << m.opt.zero.stage << ", " << m.registry.size() << " parameters ("
                   << m.layout.payload_elems() << " elements) in " << m.layout.buckets().size() << " buckets, world "
                   << env.world << "\n"
                   << memory().table();
  }
  return Status::Ok();
}

int64_t Engine::accum_steps() const { return impl_->opt.accum_steps; }
bool Engine::finalized() const { return impl_->finalized; }
const EngineOptions& Engine::options() const { return impl_->opt; }
int Engine::rank() const { return impl_->env.rank; }
int Engine::world_size() const { return impl_->env.world; }
Stream& Engine::compute_stream() {
  // The streams are made by finalize(); a reference cannot say "not yet".
  if (!impl_->finalized) throw Error(impl_->env.invalid("compute_stream(): before finalize() succeeded"));
  if (const Status alive = impl_->env.context_alive("compute_stream()"); !alive.ok()) throw Error(alive);
  return impl_->env.exec->compute();
}
MemoryReport Engine::memory() const { return impl_->memory_report(); }
std::string Engine::describe_layout() const { return impl_->finalized ? impl_->layout.describe() : std::string(); }
std::vector<std::string> Engine::param_names() const { return impl_->registry.names(); }
Status Engine::error() const { return impl_->env.failure.status(); }
double Engine::loss_scale() const {
  Impl& m = *impl_;
  if (!m.state || !m.state->scaler() || m.env.ctx_life.expired()) return 1.0;
  // The scale follows the outcome of the last step (an overflow backs it off): learn it.
  Status s = m.state->settle(0, m.env.who + ": loss_scale()");
  if (!s.ok()) m.env.defer(s);
  return m.state->loss_scale();
}
Status Engine::step_async() { return impl_->step_async(); }
StatusOr<StepStats> Engine::step_stats() { return impl_->step_stats(); }
StatusOr<StepStats> Engine::step() {
  ZDP_RETURN_IF_ERROR(impl_->step_async());
  return impl_->step_stats();
}

void* Engine::param(Param p) {
  Impl& m = *impl_;
  if (!m.view_allowed("param", p.index)) return nullptr;
  StatusOr<void*> view = m.params->view(p.index, m.registry.label(p.index));
  if (!view.ok()) {
    m.env.defer(view.status());
    return nullptr;
  }
  if (*view == nullptr && !m.warned_param_outside_scope) {
    // Documented (nullptr outside the scope), so not a failure of the engine; said once,
    // because a trainer that does not expect it dereferences null next.
    m.warned_param_outside_scope = true;
    ZDP_LOG(kWarn) << m.env.who << ": param(" << m.registry.label(p.index)
                   << "): stage 3 parameters exist only inside an open scope of their layer group; nullptr";
  }
  return *view;
}

void* Engine::typed(void* view, size_t bytes, const char* call, Param p) {
  Impl& m = *impl_;
  const size_t element = dtype_size(m.opt.compute_dtype);
  if (view == nullptr || bytes == element) return view;
  m.env.defer(m.env.invalid(std::string(call) + "(" + m.registry.label(p.index) + "): an element of " +
                            std::to_string(bytes) + " bytes, but the compute dtype " + to_string(m.opt.compute_dtype) +
                            "'s is " + std::to_string(element)));
  return nullptr;
}

void* Engine::grad(Param p) {
  Impl& m = *impl_;
  if (!m.view_allowed("grad", p.index)) return nullptr;
  StatusOr<void*> view = m.grads->view(p.index, m.state->step_label());
  if (!view.ok()) {
    m.env.defer(view.status());
    return nullptr;
  }
  return *view;
}

Status Engine::grad_ready(Param p) {
  Impl& m = *impl_;
  ZDP_RETURN_IF_ERROR(m.env.context_alive("grad_ready()"));
  if (!m.finalized) return m.env.invalid("grad_ready(): before finalize()");
  ZDP_RETURN_IF_ERROR(m.env.failure.status());
  if (!m.registry.valid(p.index)) return m.env.invalid("grad_ready(): no parameter #" + std::to_string(p.index));
  return m.grads->mark_ready(p.index, m.state->step_label());
}

StatusOr<std::vector<float>> Engine::gather_master(Param p) {
  Impl& m = *impl_;
  ZDP_RETURN_IF_ERROR(m.env.context_alive("gather_master()"));
  if (!m.finalized) return m.env.invalid("gather_master(): before finalize()");
  ZDP_RETURN_IF_ERROR(m.env.failure.status());  // sticky: a failed load left the masters half loaded
  if (!m.registry.valid(p.index)) return m.env.invalid("gather_master(): no parameter #" + std::to_string(p.index));
  return m.state->gather_master(p.index, m.registry.label(p.index));
}

StatusOr<std::vector<TimelineEvent>> Engine::timeline() {
  Impl& m = *impl_;
  if (!m.opt.trace) return m.env.invalid("timeline(): EngineOptions::trace is off");
  ZDP_RETURN_IF_ERROR(m.env.context_alive("timeline()"));
  if (!m.env.exec) return std::vector<TimelineEvent>{};
  ZDP_RETURN_IF_ERROR(m.env.exec->synchronize(m.env.who + ": timeline()"));
  return m.timeline.copy();
}

std::vector<TimelineEvent> Engine::take_timeline() {
  if (impl_->env.ctx_life.expired()) return {};  // its stream clocks went with the context
  return impl_->timeline.take();
}

Status Engine::mark(TimelineEvent::Kind kind) {
  Impl& m = *impl_;
  if (kind < TimelineEvent::Kind::kIterationBegin || kind > TimelineEvent::Kind::kOutsideEnd) {
    return m.env.invalid("mark(): kind " + std::to_string(static_cast<int>(kind)) +
                         " is one of the engine's own timeline points, not a trainer's");
  }
  ZDP_RETURN_IF_ERROR(m.env.context_alive("mark()"));
  m.timeline.compute(kind);
  return Status::Ok();
}

StatusOr<Engine::LayerScope> Engine::layer(int layer, Pass pass) {
  Impl& m = *impl_;
  ZDP_RETURN_IF_ERROR(m.env.context_alive("layer()"));
  if (!m.finalized) return m.env.invalid("layer(" + std::to_string(layer) + "): before finalize()");
  ZDP_RETURN_IF_ERROR(m.env.failure.status());
  // At every stage, so that an off-by-one found at stage 3 is found on a stage-0 run too
  // (a group between registered ones, without parameters, is a group: nothing to gather).
  const int last = m.layout.params().empty() ? 0 : m.layout.params().back().layer;
  if (layer < 0 || layer > last) {
    return m.env.invalid("layer(" + std::to_string(layer) + "): no such layer group (parameters were registered in "
                         "groups 0.." + std::to_string(last) + ")");
  }
  ZDP_RETURN_IF_ERROR(m.params->enter(layer, pass == Pass::kForward));
  return LayerScope(this, layer, m.scope_token);
}

void Engine::end_scope(int layer) {
  if (impl_->env.ctx_life.expired()) return;  // its streams are gone with the context
  impl_->params->exit(layer);
}

void Engine::LayerScope::end() {
  if (engine_ != nullptr && !alive_.expired()) engine_->end_scope(layer_);
  engine_ = nullptr;
}

Engine::LayerScope::LayerScope(LayerScope&& other) noexcept
    : engine_(other.engine_), layer_(other.layer_), alive_(std::move(other.alive_)) {
  other.engine_ = nullptr;
}

Engine::LayerScope& Engine::LayerScope::operator=(LayerScope&& other) noexcept {
  if (this != &other) {
    end();
    engine_ = other.engine_;
    layer_ = other.layer_;
    alive_ = std::move(other.alive_);
    other.engine_ = nullptr;
  }
  return *this;
}

Engine::LayerScope::~LayerScope() { end(); }

}  // namespace zdp
