#include "harness/cli/cmd_plan_model.hpp"

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/jobs/job_miniature.hpp"
#include "harness/jobs/job_search.hpp"

namespace shardlab {

namespace {

struct PlanModelOptions {
  std::string model, cluster, print_model, print_cluster;
  int devices = 0, top = 3;
  bool json = false, overlap_dp = false, miniature = false, no_miniature = false;
};

nlohmann::ordered_json miniature_json(const Miniature& m) {
  nlohmann::ordered_json j = {{"mesh", m.mesh}, {"layout_run", m.run.text()}, {"notes", m.notes},
                              {"pass", m.pass()}, {"terms_matched", m.matched()}, {"terms", m.terms.size()}};
  j["checks"] = nlohmann::ordered_json::array();
  for (const auto& v : m.verdicts) j["checks"].push_back({{"name", v.name}, {"pass", v.pass}});
  j["byte_terms"] = nlohmann::ordered_json::array();
  for (const auto& t : m.terms)
    j["byte_terms"].push_back({{"device", t.device}, {"part", t.part}, {"plan_bytes", t.model}, {"ledger_bytes", t.ledger}});
  return j;
}

nlohmann::ordered_json cost_json(const JobCost& j) {
  const auto& l = j.layout;
  const auto& x = j.memory;
  const auto& t = j.time;
  return {{"layout", l.text()}, {"dp", l.dp}, {"tp", l.tp}, {"sp", l.sp}, {"cp", l.cp}, {"pp", l.pp}, {"virtual_stages", l.vp},
          {"ep", l.ep}, {"zero", l.zero}, {"micro_batch", l.micro_batch}, {"recompute", recompute_name(l.recompute)},
          {"memory_bytes", {{"params", x.params}, {"grads", x.grads}, {"optimizer", x.optimizer},
                            {"activations", x.activations}, {"activations_no_recompute", x.activations_none},
                            {"stash_micro_batches", x.stash}, {"total", x.total()}}},
          {"seconds", {{"compute", t.compute}, {"tp", t.tp}, {"cp", t.cp}, {"cp_exposed", t.cp_exposed}, {"bubble", t.bubble}, {"p2p", t.p2p}, {"dp", t.dp},
                       {"dp_exposed", t.dp_exposed}, {"ep", t.ep}, {"optimizer", t.optimizer}, {"step", t.step()}}},
          {"mfu", j.mfu()}, {"tokens_per_s", j.tokens_per_s}, {"achieved_flops_per_device", j.achieved_flops}};
}

int run(const PlanModelOptions& o) {
  if (!o.print_model.empty()) return std::cout << model_toml(load_model(o.print_model)), 0;
  if (!o.print_cluster.empty()) return std::cout << cluster_toml(load_cluster(o.print_cluster)), 0;
  if (o.model.empty() || o.cluster.empty() || o.devices < 1) {
    std::cerr << "shardlab plan-model: give --model, --cluster and --devices (see shardlab plan-model --help)\n";
    return 2;
  }
  const ModelSpec m = load_model(o.model);
  const ClusterSpec c = load_cluster(o.cluster);
  JobSearchOptions s;
  s.devices = o.devices;
  s.plan.overlap_dp = o.overlap_dp;
  const JobSearchResult r = search_layouts(m, c, s);
  if (r.fitting.empty()) {
    double need = 1e300;
    for (const auto& j : r.too_big) need = std::min(need, j.memory.total());
    std::cerr << "shardlab plan-model: no layout of " << m.name << " fits on " << o.devices << " devices of "
              << c.name << ": the leanest needs " << need / 1e9 << " GB a device of " << c.memory_bytes / 1e9 << "\n";
    return 2;
  }
  std::unique_ptr<Miniature> mini;
  if (!o.no_miniature) mini = std::make_unique<Miniature>(run_miniature(r.fitting[0].layout, CommonOptions{}));
  const int status = mini && !mini->pass() ? 1 : 0;
  if (o.json) {
    nlohmann::ordered_json j = {{"model", m.name}, {"cluster", c.name}, {"devices", o.devices},
                                {"params", model_params(m)}, {"evaluated", r.evaluated},
                                {"fitting", r.fitting.size()}};
    j["best"] = nlohmann::ordered_json::array();
    for (int i = 0; i < o.top && i < static_cast<int>(r.fitting.size()); ++i) j["best"].push_back(cost_json(r.fitting[i]));
    if (mini) j["miniature"] = miniature_json(*mini);
    std::cout << j.dump(2) << std::endl;
    return status;
  }
  std::cout << plan_text(m, c, s, r, o.top);
  if (mini) std::cout << miniature_text(*mini, o.miniature);
  return status;
}

}  // namespace

Command add_plan_model_command(CLI::App& app) {
  auto o = std::make_shared<PlanModelOptions>();
  auto* c = app.add_subcommand("plan-model", "the best training layout of a whole model on a cluster: DP x TP(+SP) "
                                             "x CP x PP(x virtual) x EP, ZeRO, micro-batch and recomputation, with "
                                             "memory and step time by part");
  c->add_option("--model", o->model, "a preset (gpt3-175b, megatron-1t, llama3-70b, mixtral-8x7b, ...) or FILE.toml");
  c->add_option("--cluster", o->cluster, "a preset (dgx-a100, dgx-h100, tpu-v4) or FILE.toml");
  c->add_option("--devices", o->devices, "devices in the job: whole nodes");
  c->add_option("--top", o->top, "how many of the best layouts to show")->capture_default_str();
  c->add_flag("--overlap-dp", o->overlap_dp, "hide DP communication behind the backward pass");
  c->add_flag("--json", o->json, "print one JSON object instead of the tables");
  c->add_flag("--miniature", o->miniature, "show every byte term of the miniature run (device by device)");
  c->add_flag("--no-miniature", o->no_miniature, "plan only: do not run the chosen layout in miniature");
  c->add_option("--print-model", o->print_model, "print a model preset as a TOML file and stop");
  c->add_option("--print-cluster", o->print_cluster, "print a cluster preset as a TOML file and stop");
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
