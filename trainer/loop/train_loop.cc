// train(): engine + model + data, the step loop, evaluation and the console lines.
//
// On GPUs nothing inside a step waits on the host: the step is issued with
// Engine::step_async(), the loss stays on the device (loss_log.h) and uploads go through
// pinned memory. The host reads values only where a line is printed (every log_every
// steps, the first and the last), and measures throughput over the steps since the
// previous such line, from one read to the next (the GPU's own pace, not the host's
// issue time).
#include "trainer/loop/train_loop.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "runtime/internal/gpu_datasheets.h"
#include "runtime/internal/host_waits.h"
#include "trainer/data/same_data.h"
#include "trainer/data/sampler.h"
#include "trainer/data/source.h"
#include "trainer/loop/checkpointing.h"
#include "trainer/loop/console.h"
#include "trainer/loop/eta.h"
#include "trainer/loop/loss_log.h"
#include "trainer/loop/param_hash.h"
#include "trainer/loop/kernel_profile.h"
#include "trainer/loop/profiling.h"
#include "trainer/loop/progress_report.h"
#include "trainer/loop/same_arithmetic.h"
#include "trainer/models/model.h"
#include "trainer/models/model_spec.h"

namespace zdp::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One rank's peak FLOP/s for MFU, in the step lines and the profile summary alike:
// profile.peak_tflops when set, else the datasheet peak of a GPU known by its exact name
// (runtime/internal/gpu_datasheets.h) for the model's dtype: dense bf16/fp16 tensor cores,
// or plain fp32. Other devices (an H100 PCIe, the CPU) get no MFU without peak_tflops.
double peak_flops(const Config& config, const Device& device) {
  if (config.profile.peak_tflops > 0) return config.profile.peak_tflops * 1e12;
  if (device.kind() != DeviceKind::kCuda) return 0;
  const GpuSpec* gpu = gpu_of_device(device.name());
  if (gpu == nullptr) return 0;
  return config.model.dtype == DType::kF32 ? gpu->fp32_flops : gpu->bf16_flops;
}

// Sums `values` over the ranks (fp32; scalars of logging, not of training).
Status sum_over_ranks(Context& ctx, Ops& ops, Stream& stream, std::vector<float>& values) {
  if (ctx.world_size() == 1) return Status::Ok();
  const size_t bytes = values.size() * sizeof(float);
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer buf, ops.alloc(static_cast<int64_t>(values.size()), DType::kF32));
  ZDP_RETURN_IF_ERROR(ops.upload(buf.data(), values.data(), bytes));
  ZDP_RETURN_IF_ERROR(ctx.comm().all_reduce(buf.data(), buf.data(), static_cast<int64_t>(values.size()), DType::kF32,
                                            ReduceOp::kSum, stream));
  ZDP_RETURN_IF_ERROR(stream.synchronize(ctx.collective_timeout() + std::chrono::seconds(10)));
  return ops.download(values.data(), buf.data(), bytes);
}

// Every rank's `mine` (the same count on each), gathered: rank r's at r x count. Doubles
// travel as int64 words (an all-gather moves bytes).
StatusOr<std::vector<double>> gather_over_ranks(Context& ctx, Ops& ops, Stream& stream, const std::vector<double>& mine) {
  if (ctx.world_size() == 1) return mine;
  const int64_t count = static_cast<int64_t>(mine.size());
  const int64_t bytes = count * static_cast<int64_t>(sizeof(double));
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer send, ops.alloc_bytes(bytes));
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer recv, ops.alloc_bytes(bytes * ctx.world_size()));
  ZDP_RETURN_IF_ERROR(ops.upload(send.data(), mine.data(), static_cast<size_t>(bytes)));
  ZDP_RETURN_IF_ERROR(ctx.comm().all_gather(send.data(), recv.data(), count, DType::kI64, stream));
  ZDP_RETURN_IF_ERROR(stream.synchronize(ctx.collective_timeout() + std::chrono::seconds(10)));
  std::vector<double> all(mine.size() * static_cast<size_t>(ctx.world_size()));
  ZDP_RETURN_IF_ERROR(ops.download(all.data(), recv.data(), static_cast<size_t>(bytes * ctx.world_size())));
  return all;
}

// The held-out mean loss over min(eval_samples, size) samples of `val` (the same ones
// every time: val.held_out_sample, spread over a token file), micro_batch at a time.
// Default: rank r takes every K-th sample; the ranks' sums are added in fp32.
// train.deterministic: the same number at every K: the samples are cut into G contiguous
// micro-batches, micro-batch g is rank g % K's, and the G sums (double) are gathered and
// added in order g, so both the micro-batches and the sum are the same whatever K is.
StatusOr<double> evaluate(Context& ctx, Engine& engine, Model& model, Ops& ops, const DataSource& val,
                          const Config& config) {
  const int64_t total = std::min(config.train.eval_samples, val.size());
  const int K = ctx.world_size();
  const int64_t mb = config.train.micro_batch;
  const bool ordered = config.train.deterministic;
  // Each micro-batch's samples; ordered: rank r's j-th is global micro-batch j K + r.
  std::vector<std::vector<int64_t>> micro;
  if (ordered) {
    for (int64_t g = ctx.rank(); g * mb < total; g += K) {
      micro.emplace_back();
      for (int64_t i = g * mb; i < std::min(total, (g + 1) * mb); ++i) micro.back().push_back(val.held_out_sample(i, total));
    }
  } else {
    std::vector<int64_t> mine;
    for (int64_t i = ctx.rank(); i < total; i += K) mine.push_back(val.held_out_sample(i, total));
    for (size_t at = 0; at < mine.size(); at += static_cast<size_t>(mb)) {
      const size_t end = std::min(mine.size(), at + static_cast<size_t>(mb));
      micro.emplace_back(mine.begin() + static_cast<std::ptrdiff_t>(at), mine.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  // Every rank evaluates the same number of micro-batches: at stage 3 each one gathers
  // the parameters (collectives), so a rank with fewer (when the samples do not split
  // evenly) pads with a repeat of the first micro-batch, whose loss is dropped.
  const int64_t G = (total + mb - 1) / mb;
  const int64_t most = ordered ? (G + K - 1) / K : ((total + K - 1) / K + mb - 1) / mb;
  const size_t real = micro.size();
  std::vector<int64_t> first;
  for (int64_t i = 0; i < std::min(mb, total); ++i) first.push_back(val.held_out_sample(i, total));
  while (static_cast<int64_t>(micro.size()) < most) micro.push_back(first);
  std::vector<double> sums;
  Batch batch;
  for (const std::vector<int64_t>& samples : micro) {
    ZDP_RETURN_IF_ERROR(val.fill(samples, &batch));
    ZDP_ASSIGN_OR_RETURN(const double mean, model.eval_micro(engine, batch));
    if (sums.size() < real) sums.push_back(mean * static_cast<double>(batch.count));
  }
  if (ordered) {
    const int64_t per_rank = most;
    sums.resize(static_cast<size_t>(per_rank), 0.0);
    ZDP_ASSIGN_OR_RETURN(const std::vector<double> all, gather_over_ranks(ctx, ops, engine.compute_stream(), sums));
    double sum = 0;
    for (int64_t g = 0; g < G; ++g) sum += all[static_cast<size_t>((g % K) * per_rank + g / K)];
    return sum / static_cast<double>(total);
  }
  double sum = 0;
  for (double s : sums) sum += s;
  std::vector<float> reduced = {static_cast<float>(sum)};
  ZDP_RETURN_IF_ERROR(sum_over_ranks(ctx, ops, engine.compute_stream(), reduced));
  return static_cast<double>(reduced[0]) / static_cast<double>(total);
}

}  // namespace

StatusOr<TrainSummary> train(Context& ctx, const Config& config, const TrainOptions& options) {
  const int K = ctx.world_size();
  const bool chief = ctx.rank() == 0;
  Console console(options.out, chief);
  ZDP_ASSIGN_OR_RETURN(EngineOptions eopts, EngineOptions::from(config, K));  // lr already scaled
  // Planned as dp-launch plan plans it. From the model's spec: the engine is made before
  // the Ops that hold its stream, so that it outlives them.
  ZDP_ASSIGN_OR_RETURN(const ModelSpec planned, model_spec(config));
  eopts.nested_layer_scopes = planned.nested_layer_scopes;
  Engine engine(ctx, eopts);
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, Ops::create(ctx.device(), eopts.compute_dtype, eopts.deterministic,
                                                                     config.model.attention));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, make_model(config, *ops));
  ZDP_RETURN_IF_ERROR(model->register_params(engine));  // local: decides fused attention (allocate)
  std::string arithmetic;  // train.deterministic: what every rank was checked to compute with
  if (eopts.deterministic) {
    arithmetic = ops->arithmetic_libraries(model->fused_attention());
    ZDP_RETURN_IF_ERROR(check_same_arithmetic(ctx.store(), ctx.rank(), K, arithmetic, ctx.collective_timeout()));
  }
  ZDP_RETURN_IF_ERROR(engine.finalize());
  ops->set_stream(engine.compute_stream(), ctx.collective_timeout() + std::chrono::seconds(30));
  StatusOr<std::unique_ptr<DataSource>> train_opened = make_source(config, Split::kTrain);
  StatusOr<std::unique_ptr<DataSource>> val_opened =
      train_opened.ok() ? make_source(config, Split::kVal) : StatusOr<std::unique_ptr<DataSource>>(nullptr);
  if (!train_opened.ok() || !val_opened.ok()) {
    return share_data_failure(ctx.store(), ctx.rank(), train_opened.ok() ? val_opened.status() : train_opened.status());
  }
  std::unique_ptr<DataSource> train_data = std::move(*train_opened), val_data = std::move(*val_opened);
  ZDP_RETURN_IF_ERROR(check_same_data(ctx.store(), ctx.rank(), DataIdentity::of(train_data.get()),
                                      DataIdentity::of(val_data.get()),
                                      "data.path = \"" + config.data.path + "\", data.val_path = \"" +
                                          config.data.val_path + "\"",
                                      ctx.collective_timeout()));
  const TrainConfig& t = config.train;
  if (val_data && config.data.kind == DataKind::kTokens) {  // synthetic data holds no token to check
    ZDP_RETURN_IF_ERROR(check_held_out_samples(*val_data, t.eval_samples).with_context("the held-out samples"));
  }

  TrainSummary summary;
  summary.params = engine.memory().params;
  summary.tokens_per_sample = model->tokens_per_sample();
  summary.peak_lr = eopts.optim.lr;
  summary.arithmetic_libraries = arithmetic;
  if (!arithmetic.empty()) console.line("dp-train: deterministic: every rank computes with " + arithmetic);
  console.line("dp-train: " + model->describe() + (model->fused_attention() ? " (fused attention)" : "") + ", " +
               std::to_string(summary.params) + " parameters, " +
               to_string(eopts.compute_dtype) + ", ZeRO stage " + std::to_string(eopts.zero.stage) + " on " +
               std::to_string(K) + " rank(s) (" + ctx.device().name() + ")");
  console.line("dp-train: data " + train_data->describe() + (val_data ? "; held out: " + val_data->describe() : ""));
  char peak_lr[32];  // %g: std::to_string printed 4e-7 as 0.000000
  std::snprintf(peak_lr, sizeof(peak_lr), "%g", eopts.optim.lr);
  console.line("dp-train: global batch " + std::to_string(t.global_batch) + " = " + std::to_string(K) +
               " ranks x micro_batch " + std::to_string(t.micro_batch) + " x accum_steps " +
               std::to_string(engine.accum_steps()) + "; peak lr " + peak_lr + " (" +
               to_string(config.optim.lr_scaling) + " scaling), " + to_string(config.optim.schedule) + " schedule");
  if (train_data->size() < t.global_batch) {
    // Allowed (the epochs follow one another within a step), but rarely what was meant.
    console.line("dp-train: note: the training set has " + std::to_string(train_data->size()) +
                 " samples, fewer than one global batch (" + std::to_string(t.global_batch) +
                 "): every step reads some samples more than once");
  }

  // Resuming restores the engine (weights, AdamW state, optimizer step = LR schedule
  // position, loss scale) and gives the step and sample position the loop continues at.
  Checkpointer checkpoints(ctx, engine, config, console, DataIdentity::of(train_data.get()),
                           DataIdentity::of(val_data.get()));
  ZDP_ASSIGN_OR_RETURN(const ResumePoint resumed, checkpoints.resume());
  summary.first_step = resumed.step;
  summary.resumed_from = resumed.path;
  summary.history = resumed.history;  // a resumed run's curve continues the saved one
  SamplerOptions sampling{train_data->size(), t.global_batch, t.micro_batch, K, ctx.rank(),
                          config.data.shuffle, static_cast<uint64_t>(t.seed)};
  sampling.start_step = resumed.step;
  sampling.start_position = resumed.data_position;
  sampling.last_step = t.steps;
  ZDP_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::create(sampling));

  // The whole run's ETA (evaluations and saves included) for the console and dp-launch.
  EtaEstimator eta(config, val_data != nullptr);
  JobProgress start_point;
  start_point.step = resumed.step;
  start_point.steps = t.steps;
  ProgressReporter progress(ctx, start_point);
  const auto eval_and_log = [&](int64_t done) -> Status {
    const auto eval_start = Clock::now();
    console.clear();
    progress.phase("eval");
    // No step counts the evaluation's work (at stage 3 its gathers were the next step's).
    ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kOutsideBegin));
    StatusOr<double> evaluated = evaluate(ctx, engine, *model, *ops, *val_data, config);
    ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kOutsideEnd));
    ZDP_ASSIGN_OR_RETURN(const double v, std::move(evaluated));
    eta.eval_done(seconds_since(eval_start));
    summary.evals.emplace_back(done, v);
    summary.history.add_eval(done, v);
    console.line("eval step " + std::to_string(done) + " | held-out loss " + std::to_string(v) + " (" +
                 std::to_string(std::min(t.eval_samples, val_data->size())) + " samples)");
    return Status::Ok();
  };
  // A fresh run is evaluated once before training (as nanoGPT does at iteration 0), so
  // the console shows where the held-out loss starts from (ln vocab for a new model).
  // Before the profiler exists: evaluations are never part of a measured step.
  if (val_data && t.eval_every > 0 && resumed.step == 0 && t.steps > 0) ZDP_RETURN_IF_ERROR(eval_and_log(0));

  const double peak = peak_flops(config, ctx.device());
  if (resumed.step >= t.steps) {
    console.line("dp-train: the checkpoint is at step " + std::to_string(resumed.step) + ", train.steps is " +
                 std::to_string(t.steps) + ": nothing to train (raise train.steps to continue)");
  }
  // Profiling runs: the engine records its timeline (EngineOptions::trace), the loop and
  // the model mark where each part of a step begins, the profiler takes them every step.
  std::unique_ptr<Profiler> profiler;
  std::chrono::milliseconds test_delay{0};
  if (config.profile.enabled) {
    profiler = make_profiler(ctx, engine, config, *model, peak, resumed.step, options.out);
    ZDP_ASSIGN_OR_RETURN(test_delay, profile_test_delay(ctx.rank()));
  } else if (ctx.rank() == 0) {
    // An earlier profiled run's files beside this run's train_summary.json were taken for
    // this run's: said once, and left as they are.
    const std::string dir = ProfileOptions::from(config).dir;
    const std::string earlier = existing_profile_files(dir);
    if (!earlier.empty()) {
      console.line("profile: " + earlier + " in " + dir + " are an earlier run's (profile.enabled = false here), " +
                   "left as they were");
    }
  }
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<KernelProfile> kernel_times,
                       KernelProfile::create(ctx, engine, *ops, config, *model, resumed.step));
  // Unread losses: at most one logging interval (a full log is read early, a bounded wait).
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<LossLog> losses,
                       LossLog::create(ctx, *ops, engine.compute_stream(), std::min<int64_t>(t.log_every, 1024),
                                       engine.accum_steps(),
                                       eopts.deterministic ? LossLog::Order::kGlobalMicroBatches
                                                           : LossLog::Order::kPerRank));
  const auto start = Clock::now();
  const auto read_losses = [&]() -> Status {
    ZDP_ASSIGN_OR_RETURN(const std::vector<double> read, losses->read());
    summary.losses.insert(summary.losses.end(), read.begin(), read.end());
    return Status::Ok();
  };
  // Step times: the steps issued since the window opened, timed when the host next reads
  // their results (having waited for the device), so evaluations and checkpoints, which
  // close the window before and open it after, are left out.
  auto window_start = start;
  auto data_checked = start;
  const double data_files = static_cast<double>(train_data->file_count() + (val_data ? val_data->file_count() : 0));
  int64_t window_steps = 0;
  double step_s = 0;  // the last window's seconds per step
  const auto tokens_per_s = [&]() {
    return step_s > 0 ? static_cast<double>(t.global_batch) / step_s * static_cast<double>(model->tokens_per_sample())
                      : 0.0;
  };
  size_t in_history = 0;  // summary.losses already added to summary.history
  const auto close_window = [&]() -> Status {
    ZDP_RETURN_IF_ERROR(read_losses());
    if (window_steps == 0) return Status::Ok();
    step_s = std::chrono::duration<double>(Clock::now() - window_start).count() / static_cast<double>(window_steps);
    summary.step_seconds.insert(summary.step_seconds.end(), static_cast<size_t>(window_steps), step_s);
    for (int64_t i = 0; i < window_steps; ++i) eta.step_done(step_s);
    // Every step read since the last window, at this window's rate (loss.svg's curve).
    for (; in_history < summary.losses.size(); ++in_history) {
      const int64_t at = resumed.step + static_cast<int64_t>(in_history) + 1;
      summary.history.add_step(at, summary.losses[in_history], tokens_per_s());
    }
    window_steps = 0;
    return Status::Ok();
  };
  Batch batch;
  for (int64_t step = resumed.step; step < t.steps; ++step) {
    ctx.set_step(step + 1);  // liveness reports count steps from 1, as the console does
    ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kIterationBegin));
    if (profiler) profiler->begin_step();  // an evaluation's or a save's peak is not this step's
    if (options.at_phase) options.at_phase(ctx, step + 1, TrainPhase::kForward);
    if (losses->full()) ZDP_RETURN_IF_ERROR(read_losses());
    // The host's time in forward + backward (on a GPU: issuing them), less its waits for
    // the communication stream (CPU: peers' gathers and reductions), so that a rank that
    // waits for a slow peer does not read as slow as it.
    double compute_s = 0;
    if (kernel_times) kernel_times->begin_step(step);
    for (int64_t m = 0; m < engine.accum_steps(); ++m) {
      const auto micro_start = Clock::now();
      const double waited_before = host_waits().stream_order_seconds;
      ZDP_RETURN_IF_ERROR(train_data->fill(sampler.micro_batch(step, m), &batch));
      ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kForward));
      ZDP_RETURN_IF_ERROR(model->forward_backward(engine, batch, losses->sink(m, engine.accum_steps())));
      if (test_delay.count() > 0) std::this_thread::sleep_for(test_delay);  // profile_run_test's straggler
      ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kMicroEnd));
      compute_s += seconds_since(micro_start) - (host_waits().stream_order_seconds - waited_before);
    }
    if (kernel_times) kernel_times->end_step();
    if (options.at_phase) options.at_phase(ctx, step + 1, TrainPhase::kOptimizer);
    ZDP_RETURN_IF_ERROR(engine.step_async());
    ZDP_RETURN_IF_ERROR(losses->end_step());  // the step's loss kept on the device for the log
    ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kIterationEnd));
    if (profiler) profiler->end_step();
    ++window_steps;
    const int64_t done = step + 1;
    // Both ETAs below come before this step's evaluation and save, which they count.
    // The first step this process runs is logged too (step 1, or a resumed run's first):
    // it also times the first window, without which the ETA stayed "?" until a log_every.
    if (done % t.log_every == 0 || done == resumed.step + 1 || done == t.steps) {
      // The one place the host reads what the device computed (it waits for it here).
      ZDP_ASSIGN_OR_RETURN(const StepStats stats, engine.step_stats());
      ZDP_RETURN_IF_ERROR(close_window());
      window_start = Clock::now();
      StepLine line{done, t.steps, summary.losses.back(), stats.lr, stats.grad_norm, 0, 0, step_s * 1e3, -1,
                    eta.eta_s(done, true)};
      line.samples_per_s = static_cast<double>(t.global_batch) / step_s;
      line.tokens_per_s = tokens_per_s();
      if (peak > 0) line.mfu = model->flops_per_sample() * line.samples_per_s / K / peak;
      // A step skipped for a non-finite gradient: in fp16 an overflow the loss scale backs off
      // from, in fp32/bf16 a gradient that diverged.
      const char* skipped = eopts.compute_dtype == DType::kF16 ? " | skipped (fp16 overflow)"
                                                               : " | skipped (non-finite gradient)";
      console.line(Console::format(line) + (stats.skipped ? skipped : ""));
      summary.optimizer_steps = stats.step;  // the last step is always logged
    }
    // For dp-launch's status line, after a logged step's window closed: published before it,
    // the first step's record said "ETA ?" and no loss for the whole next step. The loss and
    // rate of the last window read (the live status never makes the host wait); -1 until a
    // loss was read (a resumed run's first steps): the status line shows none.
    const double last_loss = summary.losses.empty() ? -1.0 : summary.losses.back();
    progress.step({done, t.steps, last_loss, tokens_per_s(), seconds_since(start), eta.eta_s(done, true), "train"},
                  compute_s);
    const bool eval_due = val_data && ((t.eval_every > 0 && done % t.eval_every == 0) || done == t.steps);
    const bool save_due = checkpoint_due(config, done);
    if (eval_due || save_due || done == t.steps) ZDP_RETURN_IF_ERROR(close_window());
    if (eval_due) ZDP_RETURN_IF_ERROR(eval_and_log(done));
    if (options.at_phase) options.at_phase(ctx, done, TrainPhase::kAfterStep);
    // Token files changed in place (TokenFile::check_unchanged): before every save, so no
    // checkpoint holds steps trained on changed data unnoticed, at the end, and otherwise at
    // most every 10 s, or 10 ms a shard (a stat() each: thousands on NFS are round trips).
    if (save_due || done == t.steps || seconds_since(data_checked) >= std::max(10.0, 0.01 * data_files)) {
      ZDP_RETURN_IF_ERROR(train_data->check_unchanged());
      if (val_data) ZDP_RETURN_IF_ERROR(val_data->check_unchanged());
      data_checked = Clock::now();
    }
    if (save_due) {
      const auto save_start = Clock::now();
      console.clear();  // the save logs on stderr
      progress.phase("checkpoint");
      ZDP_RETURN_IF_ERROR(checkpoints.save(done, sampler.position_of_step(done), summary.history));
      eta.save_done(seconds_since(save_start));
    }
    if (eval_due || save_due) window_start = Clock::now();
    console.progress(done, t.steps, eta.eta_s(done), summary.losses.empty() ? -1.0 : summary.losses.back());
  }
  if (eopts.deterministic) {  // one line to compare runs by (param_hash.h says what is hashed)
    ZDP_ASSIGN_OR_RETURN(summary.param_sha256, param_sha256(engine));
    console.line("dp-train: parameter sha256 " + summary.param_sha256 +
                 " (fp32 masters, registration order, little-endian)");
  }
  progress.phase("done");
  console.finish();
  summary.seconds = seconds_since(start);
  // A profile that cannot be written (a full disk, its folder replaced) does not undo the
  // run: train_summary.json and loss.svg are still written, then the failure is reported.
  if (profiler) {
    if (Status s = profiler->finish().status(); !s.ok()) summary.output_failures.push_back(std::move(s));
  }
  if (kernel_times) {
    if (Status s = kernel_times->finish(options.out); !s.ok()) summary.output_failures.push_back(std::move(s));
  }
  return summary;
}

}  // namespace zdp::trainer
