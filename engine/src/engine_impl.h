// Engine::Impl: one engine, as named parts that each own their buffers and state:
//   EngineEnv        where it runs (rank, device, communicator, streams), the sticky failure
//   ParamRegistry    what the trainer registered (param_registry.h)
//   Layout           where every element lives: flat buffer, buckets, slices (layout.h)
//   ParamGatherer    the compute-dtype parameters, their views and all-gathers (param_gatherer.h)
//   GradReducer      the gradients, their accumulation and reductions (grad_reducer.h)
//   OptimizerState   masters, moments, the optimizer and the loss scaler (optimizer_state.h)
//   QuantizedExchange compressed collectives and the error feedback (quantized_exchange.h)
//   Timeline         the trace of the streams (timeline.h)
// engine.cc holds the API and finalize(), engine_step.cc step(), engine_memory.cc the
// memory report, checkpoint/ the checkpoint I/O (which sees only the optimizer state).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/src/engine_env.h"
#include "engine/src/grad_reducer.h"
#include "engine/src/layout.h"
#include "engine/src/optimizer_state.h"
#include "engine/src/param_gatherer.h"
#include "engine/src/param_registry.h"
#include "engine/src/quantized_exchange.h"
#include "engine/src/timeline.h"
#include "zdp/engine.h"

namespace zdp {

struct Engine::Impl {
  Impl(Context& context, EngineOptions options) : env(context), opt(std::move(options)), timeline(opt.trace) {}

  EngineEnv env;
  EngineOptions opt;
  ParamRegistry registry;
  bool finalized = false;
  bool past_agreement = false;  // finalize() reached its build agreement (a retry then fails at once)
  bool warned_param_outside_scope = false;  // param() at stage 3 outside its scope, said once
  // What each LayerScope watches (LayerScope::alive_): a scope kept past the engine's end
  // read freed memory when it ended.
  std::shared_ptr<void> scope_token = std::make_shared<int>(0);
  Layout layout;
  Timeline timeline;
  // Made by finalize(), in this order; each refers to env, opt, layout and timeline.
  std::unique_ptr<OptimizerState> state;
  std::unique_ptr<QuantizedExchange> quant;
  std::unique_ptr<GradReducer> grads;
  std::unique_ptr<ParamGatherer> params;
  int64_t checkpoint_ops = 0;  // saves and loads so far: their store keys

  // finalize()'s build: layout, parts, buffers (engine.cc).
  Status build();
  // Whether `call`(p) may hand out a view: finalized, p valid, no earlier failure (else
  // the failure is deferred).
  bool view_allowed(const char* call, int p);
  // The calls that need the engine between steps: finalized, no failure, no micro-batch
  // begun, no layer scope open; then learns the outcome of every step issued (the step
  // count and loss scale are exact afterwards). `call` names the API in the error.
  // `misuse` given: a micro-batch begun or a scope open is written there instead of
  // returned (the caller's collective tells every rank; nothing is learnt then).
  Status require_between_steps(const char* call, Status* misuse = nullptr);
  // The store prefix of the next checkpoint operation (distinct per save and load, equal
  // on every rank since all ranks call them in the same order).
  std::string next_checkpoint_prefix(const char* op);

  Status step_async();                 // engine_step.cc
  StatusOr<StepStats> step_stats();    // engine_step.cc
  MemoryReport memory_report() const;  // engine_memory.cc
};

}  // namespace zdp
