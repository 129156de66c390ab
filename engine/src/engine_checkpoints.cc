// Engine::save_checkpoint and Engine::load_checkpoint: the engine-side steps around the
// checkpoint I/O (checkpoint/), which sees only the optimizer state: the between-steps
// check and the store prefix before, and after a load the compute-dtype parameters
// recomputed from the masters and a fresh step.
#include <chrono>

#include "engine/src/checkpoint/engine_checkpoint.h"
#include "engine/src/engine_impl.h"
#include "zdp/log.h"

namespace zdp {

StatusOr<std::string> Engine::save_checkpoint(const std::string& root, const CheckpointState& state,
                                              const SaveOptions& options) {
  Impl& m = *impl_;
  // A step or scope open here: every rank learns of it in save()'s first agreement, as long
  // as this rank issued no collective of that step (api.md says where that ends).
  Status misuse;
  ZDP_RETURN_IF_ERROR(m.require_between_steps("save_checkpoint", &misuse));
  PrefixStore store(m.next_checkpoint_prefix("save"), m.env.ctx.store());
  checkpoint::CheckpointParts parts{m.env, m.opt, m.layout, *m.state};
  return checkpoint::save(parts, store, root, state, options, misuse);
}

StatusOr<CheckpointState> Engine::load_checkpoint(const std::string& path_or_root, const LoadOptions& options) {
  Impl& m = *impl_;
  Status misuse;  // as in save_checkpoint
  ZDP_RETURN_IF_ERROR(m.require_between_steps("load_checkpoint", &misuse));
  const auto start = std::chrono::steady_clock::now();
  PrefixStore store(m.next_checkpoint_prefix("load"), m.env.ctx.store());
  checkpoint::CheckpointParts parts{m.env, m.opt, m.layout, *m.state};
  ZDP_ASSIGN_OR_RETURN(CheckpointState saved, checkpoint::load(parts, store, path_or_root, options, misuse));
  const std::string where = m.env.who + ": load_checkpoint from " + path_or_root;
  ZDP_RETURN_IF_ERROR(m.env.failure.fail(m.params->restore_from_masters(m.state->master(), m.state->steps(), where)));
  m.grads->reset_step();
  if (m.quant->error() != nullptr) {
    // Checkpoints do not keep the error feedback: it is at most half a quantization step
    // per element, one step's rounding (README "Compressed communication").
    ZDP_RETURN_IF_ERROR(m.env.failure.fail(m.quant->reset_error()));
    if (m.env.rank == 0) {
      ZDP_LOG(kInfo) << "checkpoint: the error-feedback buffers of zero.reduce_dtype = \""
                     << to_string(m.opt.zero.reduce_quant)
                     << "\" start at zero (checkpoints do not keep them; one step's rounding is dropped)";
    }
  }

  if (m.env.rank == 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ZDP_LOG(kInfo) << "checkpoint: loaded step " << saved.step << " from " << saved.path << " (saved by "
                   << saved.world_size << " ranks at stage " << saved.stage << ", " << saved.compute_dtype << "; now "
                   << m.env.world << " ranks at stage " << m.opt.zero.stage << ", " << to_string(m.opt.compute_dtype)
                   << (options.scope == LoadScope::kFull ? "" : "; weights only")
                   << (options.checksums == ChecksumPolicy::kVerify ? "" : "; checksums skipped") << ") in " << seconds
                   << " s";
  }
  return saved;
}

}  // namespace zdp
