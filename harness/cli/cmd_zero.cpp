#include "harness/cli/cmd_zero.hpp"

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/mesh.hpp"
#include "harness/cli/cli.hpp"
#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/models/zero.hpp"

namespace shardlab {

namespace {

struct ZeroOptions {
  std::string params, optimizer = "adam";
  int devices = 0;
  bool json = false;
  std::string uneven = "chunk";
};

std::string gb(double bytes) { return format_number(bytes / 1e9, bytes < 1e9 ? "%.2f" : "%.1f"); }

std::string count_text(double n) {
  if (n >= 1e9) return format_number(n / 1e9, "%.4g") + " billion";
  if (n >= 1e6) return format_number(n / 1e6, "%.4g") + " million";
  return format_number(n, "%.0f");
}

int run(const ZeroOptions& o) {
  const double params = parse_param_count(o.params, "--params");
  if (o.devices < 1) throw Error(ErrorKind::parse, "--devices has " + std::to_string(o.devices) + ", expected at least 1");
  const Uneven uneven = parse_uneven(o.uneven);
  const auto stages = zero_stages(params, o.devices, o.optimizer, uneven);
  const double k = optimizer_state_bytes(o.optimizer);
  if (o.json) {
    nlohmann::ordered_json j = {{"params", params}, {"devices", o.devices}, {"optimizer", o.optimizer},
                                {"optimizer_state_bytes_per_param", k}};
    j["stages"] = nlohmann::ordered_json::array();
    for (const auto& s : stages)
      j["stages"].push_back({{"stage", s.name}, {"param_bytes", s.param_bytes}, {"grad_bytes", s.grad_bytes},
                             {"optimizer_state_bytes", s.state_bytes}, {"memory_bytes", s.memory_bytes()},
                             {"sent_bytes_per_step", s.sent_bytes}});
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::cout << "shardlab zero: " << count_text(params) << " parameters on " << o.devices << (o.devices == 1 ? " device" : " devices")
            << ", mixed-precision "
            << o.optimizer << ":\n  2 + 2 + " << format_number(k, "%.0f")
            << " bytes per parameter (parameters, gradients, optimizer states); GB = 1e9 bytes\n";
  Table t({"stage", "params GB", "grads GB", "optimizer GB", "per device GB", "sent/step GB", "vs DP"});
  for (const auto& s : stages)
    t.add({s.name, gb(s.param_bytes), gb(s.grad_bytes), gb(s.state_bytes), gb(s.memory_bytes()), gb(s.sent_bytes),
           stages[0].sent_bytes > 0 ? format_number(s.sent_bytes / stages[0].sent_bytes, "%.2f") + "x" : "-"});
  std::cout << t.text()
            << "  ZeRO-1 and ZeRO-2 send what plain DP sends (a ReduceScatter and an AllGather make one\n"
               "  AllReduce); ZeRO-3 gathers each layer's parameters again for the backward pass: 1.5x.\n";
  return 0;
}

}  // namespace

Command add_zero_command(CLI::App& app) {
  auto o = std::make_shared<ZeroOptions>();
  auto* c = app.add_subcommand("zero", "memory per device and bytes per step of data parallelism and ZeRO stages "
                                       "1-3 (article 004)");
  c->add_option("--params", o->params, "parameters, e.g. 7.5B, 350M or 1e9")->required();
  c->add_option("--devices", o->devices, "data-parallel devices")->required();
  c->add_option("--optimizer", o->optimizer, "adam (12 bytes of state per parameter) or sgd (8: with momentum)")
      ->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object instead of the table");
  add_uneven_option(c, o->uneven);
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
