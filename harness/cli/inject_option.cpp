#include "harness/cli/inject_option.hpp"

#include <CLI/CLI.hpp>

#include "collectives/fault.hpp"
#include "core/error.hpp"

namespace shardlab {

void add_inject_option(CLI::App* app, std::string& inject) {
  app->add_option("--inject", inject,
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
}

}  // namespace shardlab
