#include "launcher/dp_train_checks.h"

#include <filesystem>
#include <sstream>

#include "core/internal/printable.h"

namespace zdp::launcher {
namespace {

// dp-train takes its whole config from the file dp-launch resolved and checked
// ($ZDP_CONFIG): its --config or --set in launch.args would replace or change that config
// in every rank after every check here, --help would end every rank at once without
// training, and any other argument stops every rank at start-up.
std::string dp_train_args_error(const std::vector<std::string>& args) {
  const std::string& a = args.front();
  const auto flag = [&](const char* name) { return a == name || a.rfind(std::string(name) + "=", 0) == 0; };
  std::string why;
  if (flag("--config")) {
    why = "dp-train's --config would replace, in every rank, the config dp-launch checked; name the file on "
          "dp-launch's command line instead";
  } else if (flag("--set")) {
    why = "dp-train's --set would change, in every rank, the config dp-launch checked; put the --set on dp-launch's "
          "command line instead, where it is checked before any rank starts";
  } else if (a == "-h" || a == "--help") {
    why = "dp-train's --help would end every rank without training; run dp-train --help yourself";
  } else {
    why = "dp-train takes no argument '" + printable(a, 64) + "' (its only flags, --config and --set, come from dp-launch)";
  }
  return "launch.args = [" + std::to_string(args.size()) + " argument(s)] is refused: " + why +
         "; dp-train reads every setting from the config, so launch.args is for another launch.program";
}

// Each line of `problems` a note (a dry run: the launch itself would stop there) or an error.
void error_or_note(const Status& problems, bool note, LaunchPlan* plan, std::vector<std::string>* errors) {
  if (problems.ok()) return;
  if (!note) {
    errors->push_back(problems.message());
    return;
  }
  std::istringstream lines(problems.message());
  for (std::string line; std::getline(lines, line);) plan->notes.push_back(line + ": the launch itself would stop here");
}

}  // namespace

bool runs_dp_train(const std::string& program) {
  return std::filesystem::path(program.empty() ? "dp-train" : program).filename() == "dp-train";
}

void check_dp_train_ranks(const Config& config, const PlanInputs& inputs, LaunchPlan* plan,
                          std::vector<std::string>* errors) {
  const LaunchConfig& l = config.launch;
  // dp-train's Gloo ranks compute on the CPU (zdp::init), whose GEMM is fp32 only. With
  // launch.backend = "auto" on a dry run here without GPUs (a login node planning a GPU
  // job), "auto" resolves to gloo only on this machine: a note.
  if (plan->backend == Backend::kGloo && config.model.dtype != DType::kF32) {
    const bool auto_here = l.backend == Backend::kAuto;
    const Status cpu(StatusCode::kInvalidArgument,
                     config.where("model.dtype") + ": model.dtype = \"" + to_string(config.model.dtype) +
                         "\" needs GPU ranks (backend nccl), but this job's ranks use the CPU (backend gloo" +
                         (auto_here ? std::string(", as launch.backend = \"auto\" resolves here") : "") +
                         "): the CPU GEMM computes in fp32; use model.dtype = \"fp32\"");
    error_or_note(cpu, inputs.dry_run && auto_here && inputs.cuda_devices == 0, plan, errors);
  }
  if (const Status model = check_model_support(config); !model.ok()) errors->push_back(model.message());
  if (!l.args.empty()) errors->push_back(config.where("launch.args") + ": " + dp_train_args_error(l.args));
  // A missing token file or resume checkpoint stopped every rank after the launch, each
  // saying it. A dry run (of another cluster's config, say) prints them as notes.
  error_or_note(check_input_paths(config), inputs.dry_run, plan, errors);
  std::vector<std::string> inert = inert_settings(config);
  plan->inert.insert(plan->inert.end(), inert.begin(), inert.end());
  // inert_settings sees train.accum_steps = 1 only when the file says it: the derived one
  // needs the world size this launch resolved.
  if (config.zero.accumulate == GradAccumulation::kSharded && config.origins.count("zero.accumulate") &&
      config.train.accum_steps == 0 && plan->world_size > 0 && config.train.micro_batch > 0 &&
      resolved_accum_steps(config.train, plan->world_size) == 1) {
    plan->inert.push_back(config.where("zero.accumulate") +
                          ": zero.accumulate has no effect: train.accum_steps resolves to 1 at world size " +
                          std::to_string(plan->world_size) + " (train.global_batch " +
                          std::to_string(config.train.global_batch) + " / (train.micro_batch " +
                          std::to_string(config.train.micro_batch) + " x " + std::to_string(plan->world_size) +
                          ")): nothing accumulates");
  }
}

}  // namespace zdp::launcher
