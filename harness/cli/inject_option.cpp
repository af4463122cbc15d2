#include "harness/cli/inject_option.hpp"

#include <CLI/CLI.hpp>

#include "collectives/fault.hpp"
#include "core/error.hpp"

namespace shardlab {

void add_inject_option(CLI::App* app, CommonOptions& common) {
  app->add_option("--inject", common.inject,
                  "testing: plant one bug in the sharded run (perturb:E, skip-add, gather-offset, swap-blocks, "
                  "stale-receive, skip-update, swap-microbatches, wrong-axis); the verdict must be FAIL")
      ->type_name("KIND")
      ->check([](const std::string& text) {
        try {
          parse_fault(text);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  app->add_option("--replay", common.replay,
                  "bfloat16: compare each run bit for bit with a replay whose collectives are computed from their "
                  "definitions, in the ring's order (on, default); off: only the rounding bound against the "
                  "unsharded reference, to see what that alone catches")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
}

}  // namespace shardlab
