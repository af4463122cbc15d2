#include "harness/cli/timeout_option.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "collectives/watchdog.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {
double parse_seconds(const std::string& text) {
  errno = 0;
  const double v = number_syntax(text, false).empty() ? std::strtod(text.c_str(), nullptr) : 0;
  if (errno != 0 || !std::isfinite(v) || !(v > 0))
    throw CLI::ValidationError("--collective-timeout is '" + text +
                               "'; give a positive number of seconds, such as 300");
  return v;
}
}  // namespace

void add_collective_timeout(CLI::App* app, double& seconds) {
  app->add_option_function<std::string>(
         "--collective-timeout",
         [&seconds](const std::string& text) {
           seconds = parse_seconds(text);
           set_collective_timeout(seconds);
         },
         "seconds a device may wait for the others (in a collective, a send or receive) before the run "
         "stops as a runtime fault, exit 3")
      ->type_name("SECONDS")
      ->default_str(std::to_string(static_cast<int>(kDefaultCollectiveTimeout)));
}

void add_collective_timeout(CLI::App* app) {
  static double seconds = kDefaultCollectiveTimeout;
  add_collective_timeout(app, seconds);
}

}  // namespace shardlab
