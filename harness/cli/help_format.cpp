#include "harness/cli/help_format.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

namespace shardlab {

namespace {

std::size_t description_column(const std::string& line) {
  const std::size_t text = line.find_first_not_of(' ');
  const std::size_t gap = text == std::string::npos ? std::string::npos : line.find("  ", text);
  const std::size_t start = gap == std::string::npos ? std::string::npos : line.find_first_not_of(' ', gap);
  return start == std::string::npos || start > 60 ? 6 : start;
}

std::string wrap_line(const std::string& line, std::size_t width) {
  if (line.size() <= width) return line;
  const std::size_t indent = description_column(line);
  std::string out = line.substr(0, indent), word;
  std::size_t column = indent;
  bool first = true;
  std::istringstream words(line.substr(indent));
  while (words >> word) {
    if (!first && column + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
      first = true;
    }
    if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first = false;
  }
  return out;
}

class WrappingFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    return wrap_help(CLI::Formatter::make_help(app, std::move(name), mode));
  }
};

}  // namespace

std::string wrap_help(const std::string& text, std::size_t width) {
  std::string out;
  std::size_t from = 0;
  while (from < text.size()) {
    std::size_t end = text.find('\n', from);
    const bool newline = end != std::string::npos;
    if (!newline) end = text.size();
    out += wrap_line(text.substr(from, end - from), width);
    if (newline) out += '\n';
    from = end + 1;
  }
  return out;
}

std::shared_ptr<CLI::FormatterBase> wrapping_formatter() { return std::make_shared<WrappingFormatter>(); }

}  // namespace shardlab
