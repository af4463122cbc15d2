#include "core/wrap.hpp"

#include <algorithm>

namespace shardlab {

namespace {
// The column where `line`'s last column starts (after its last run of 2+ spaces before `width`),
// or 0 when it has none.
std::size_t last_column(const std::string& line, std::size_t width) {
  const std::size_t text = line.find_first_not_of(' ');
  std::size_t column = 0;
  for (std::size_t gap = line.find("  ", text); gap != std::string::npos && gap < width;
       gap = line.find("  ", gap)) {
    const std::size_t start = line.find_first_not_of(' ', gap);
    if (start == std::string::npos || start >= width) break;
    column = start;
    gap = start;
  }
  return column;
}

std::string wrap_one(const std::string& line, std::size_t width, Hang hang) {
  if (line.size() <= width) return line;
  const std::size_t indent = std::min(line.find_first_not_of(' '), line.size());
  std::size_t continuation = indent + 4;
  if (hang == Hang::last_column) {
    const std::size_t column = last_column(line, width);
    if (column == 0) continuation = indent;  // one column: continue under it
    else if (column > indent && column * 10 <= width * 7) continuation = column;
  }
  const std::string more(continuation, ' ');
  std::string out, rest = line;
  bool first = true;
  while (rest.size() > width) {
    std::size_t cut = rest.rfind(' ', width);
    const std::size_t floor = first ? indent : more.size();
    if (cut == std::string::npos || cut <= floor) cut = rest.find(' ', width);  // a word longer than the line
    if (cut == std::string::npos) break;
    out += rest.substr(0, cut) + "\n";
    rest = more + rest.substr(std::min(rest.find_first_not_of(' ', cut), rest.size()));
    first = false;
  }
  return out + rest;
}
}  // namespace

std::string wrap_lines(const std::string& text, std::size_t width, Hang hang) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out += wrap_one(line, width, hang);
    if (end == std::string::npos) break;
    out += "\n";
    start = end + 1;
  }
  return out;
}

void LineWrapBuf::flush_line() {
  if (line_.empty()) return;
  dest_->sputn(line_.data(), static_cast<std::streamsize>(line_.size()));
  line_.clear();
  dest_->pubsync();
}

int LineWrapBuf::overflow(int c) {
  if (c == traits_type::eof()) return traits_type::not_eof(c);
  if (c == '\n') {
    const std::string out = wrap_one(line_, width_, Hang::indent) + "\n";
    dest_->sputn(out.data(), static_cast<std::streamsize>(out.size()));
    line_.clear();
  } else {
    line_ += static_cast<char>(c);
  }
  return c;
}

std::streamsize LineWrapBuf::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) overflow(static_cast<unsigned char>(s[i]));
  return n;
}

int LineWrapBuf::sync() { return dest_->pubsync(); }

}  // namespace shardlab
