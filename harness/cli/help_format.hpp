// `--help` within 100 columns: CLI11 prints each option's or command's description on one line,
// however long; this formatter wraps the description under itself (core/wrap.hpp's last column).
#pragma once
#include <memory>

namespace CLI {
class FormatterBase;
}

namespace shardlab {

// A CLI11 formatter whose help is wrapped to 100 columns. Set it on an app before adding
// subcommands (they copy their parent's formatter when made).
std::shared_ptr<CLI::FormatterBase> wrapping_formatter();

}  // namespace shardlab
