#include "harness/cli/cmd_adam.hpp"

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/table.hpp"
#include "core/text.hpp"
#include "core/wrap.hpp"
#include "core/write_file.hpp"
#include "harness/check/npz.hpp"
#include "harness/check/report.hpp"
#include "harness/models/adam_step.hpp"

namespace shardlab {

namespace {

struct AdamOptions {
  AdamParams params;
  int step = 1;
  std::uint64_t seed = 0;
  std::string inputs, save;
  bool json = false, quiet = false;
};

double largest(const Tensor& t) { return t.size() ? xt::amax(xt::abs(t))() : 0.0; }

int run(const AdamOptions& o) {
  check_adam_params(o.params, o.step);
  refuse_shared_paths({{"--save", o.save}}, {{"--inputs", o.inputs}});
  if (!o.save.empty()) check_writable(o.save, "the .npz file");  // before anything runs
  std::vector<std::string> unused;
  std::vector<AdamTensor> state = o.inputs.empty() ? adam_state_generated(o.seed, o.step)
                                                   : adam_state_of(load_arrays(o.inputs), o.step, &unused);
  std::vector<Tensor> before;
  for (const AdamTensor& t : state) before.push_back(t.w);
  const std::vector<Verdict> checks = adam_step_all(state, o.step, o.params);
  bool pass = true;
  for (const Verdict& v : checks) pass = pass && v.pass;
  int saved = 0;
  std::string saved_text;
  if (pass && !o.save.empty()) {
    const auto arrays = adam_saved_arrays(state);
    try {
      save_npz(o.save, arrays);
      saved_text = "Saved " + std::to_string(arrays.size()) + " arrays to " + o.save + ": each NAME, m/NAME and "
                   "v/NAME after the step\n";
    } catch (const Error& e) {
      std::cerr << "error: " << e.what() << std::endl;
      saved = 3;
    }
  }
  const AdamParams& p = o.params;
  if (o.json) {
    nlohmann::ordered_json j = {{"case", "adam"}, {"pass", pass}, {"step", o.step}, {"lr", p.lr},
                                {"beta1", p.beta1}, {"beta2", p.beta2}, {"eps", p.eps}, {"weight_decay", 0}};
    j["tensors"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < state.size(); ++i)
      j["tensors"].push_back({{"name", state[i].name}, {"elements", state[i].w.size()},
                              {"max_abs_update", largest(state[i].w - before[i])}});
    j["checks"] = nlohmann::ordered_json::array();
    for (const Verdict& v : checks)
      j["checks"].push_back({{"name", v.name}, {"pass", v.pass}, {"max_abs_error", v.max_abs_error}});
    if (!o.inputs.empty()) j["unused"] = unused;
    if (!saved_text.empty()) j["saved"] = o.save;
    std::cout << j.dump(2) << std::endl;
    return std::max(saved, pass ? 0 : 1);
  }
  if (!o.quiet) {
    std::cout << "shardlab adam: step " << o.step << " of Adam (lr " << format_number(p.lr, "%g") << ", betas "
              << format_number(p.beta1, "%g") << " and " << format_number(p.beta2, "%g") << ", eps "
              << format_number(p.eps, "%g") << ", no weight decay) on "
              << (o.inputs.empty() ? "generated tensors (seed " + std::to_string(o.seed) + ")" : o.inputs) << "\n"
              << "  w -= lr m^ / (sqrt(v^) + eps), m^ = m / (1 - beta1^t), v^ = v / (1 - beta2^t), in float64\n\n";
    Table t({"parameter", "elements", "max |update|", "max |m|", "max |v|"});
    for (std::size_t i = 0; i < state.size(); ++i)
      t.add({state[i].name, std::to_string(state[i].w.size()), format_number(largest(state[i].w - before[i]), "%.3g"),
             format_number(largest(state[i].m), "%.3g"), format_number(largest(state[i].v), "%.3g")});
    std::cout << t.text();
    if (!unused.empty())
      std::cout << "  in the file but no parameter, gradient or moment: " << join(unused, ", ") << "\n";
    std::cout << "\nChecks:\n";
    for (const Verdict& v : checks)
      std::cout << wrap_lines("  " + v.name + ": " + v.line(), 100, Hang::last_column) << "\n";
    std::cout << (saved_text.empty() ? "" : "\n" + saved_text);
  }
  std::cout << (pass ? "PASS" : "FAIL") << " adam: step " << o.step << " on " << state.size()
            << (state.size() == 1 ? " parameter" : " parameters") << " ("
            << checks_power_phrase(checks, DType::float64) << ")\n";
  return std::max(saved, pass ? 0 : 1);
}

}  // namespace

Command add_adam_command(CLI::App& app) {
  auto o = std::make_shared<AdamOptions>();
  auto* c = app.add_subcommand("adam", "one Adam step (lessons 15 and 17's) on parameters, gradients and moments of "
                                       "your own, checked against Adam written plainly; --save writes the result");
  c->add_option("--inputs", o->inputs,
                "a .npz or folder of NAME.npy: each parameter NAME with its gradient dNAME and moments m/NAME, v/NAME "
                "(left out at step 1: zero); without it, one generated W [4, 8]");
  c->add_option("--step", o->step, "the step's number t, 1 for the first (bias correction 1 - beta^t)")
      ->capture_default_str();
  c->add_option("--lr", o->params.lr, "learning rate")->capture_default_str();
  c->add_option("--beta1", o->params.beta1, "decay of the first moment m")->capture_default_str();
  c->add_option("--beta2", o->params.beta2, "decay of the second moment v")->capture_default_str();
  c->add_option("--eps", o->params.eps, "added to sqrt(v^)")->capture_default_str();
  c->add_option("--save", o->save, "after a passing step, write each NAME, m/NAME and v/NAME as a .npz (float64)");
  c->add_option("--seed", o->seed, "seed for the generated tensors")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object instead of the text report");
  c->add_flag("--quiet", o->quiet, "print only the verdict line");
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
