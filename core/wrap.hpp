// Lines for an 80-100 column terminal: wrap_lines() breaks every line of `text` longer than `width`
// at its last space that fits, and indents the rest of it 4 more than the line's own indent.
#pragma once
#include <cstddef>
#include <streambuf>
#include <string>

namespace shardlab {

// Where a wrapped line continues: 4 past the line's own indent (prose), or under the start of its
// last column, the text after its last run of two or more spaces (tables, --help), when that
// column starts within the first 70% of the width (else as prose); a line of one column
// continues under its own indent.
enum class Hang { indent, last_column };

std::string wrap_lines(const std::string& text, std::size_t width = 100, Hang hang = Hang::indent);

// A stream buffer that holds each line until its newline, then writes it wrapped to `dest`. A line
// left without one goes out as it is at flush_line() (and on destruction).
class LineWrapBuf : public std::streambuf {
 public:
  explicit LineWrapBuf(std::streambuf* dest, std::size_t width = 100) : dest_(dest), width_(width) {}
  ~LineWrapBuf() override { flush_line(); }
  void flush_line();

 protected:
  int overflow(int c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  std::streambuf* dest_;
  std::size_t width_;
  std::string line_;
};

}  // namespace shardlab
