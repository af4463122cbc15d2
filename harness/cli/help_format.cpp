#include "harness/cli/help_format.hpp"

#include <CLI/CLI.hpp>

#include "core/wrap.hpp"

namespace shardlab {

namespace {
class WrappingFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    return wrap_lines(CLI::Formatter::make_help(app, std::move(name), mode), 100, Hang::last_column);
  }
};
}  // namespace

std::shared_ptr<CLI::FormatterBase> wrapping_formatter() { return std::make_shared<WrappingFormatter>(); }

}  // namespace shardlab
