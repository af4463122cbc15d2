// `--help` within 100 columns: CLI11 prints each option's or command's description on one line,
// however long; this formatter wraps the description under itself.
#pragma once
#include <memory>
#include <string>

namespace CLI {
class FormatterBase;
}

namespace shardlab {

// Every line of `text` longer than `width` wrapped at spaces, its continuation indented to where
// the line's description starts (after the first run of two or more spaces), or by 6.
std::string wrap_help(const std::string& text, std::size_t width = 100);

// A CLI11 formatter whose help is wrap_help'ed. Set it on an app before adding subcommands (they
// copy their parent's formatter when made).
std::shared_ptr<CLI::FormatterBase> wrapping_formatter();

}  // namespace shardlab
