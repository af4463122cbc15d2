#include "core/text.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace shardlab {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : text) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::vector<std::string> split_top(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == sep && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::string trim(const std::string& text) {
  std::size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return text.substr(b, e - b);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

namespace {
std::size_t digits_from(const std::string& text, std::size_t at) {
  std::size_t n = 0;
  while (at + n < text.size() && std::isdigit(static_cast<unsigned char>(text[at + n]))) ++n;
  return n;
}
}  // namespace

std::string number_syntax(const std::string& text, bool whole) {
  const std::string expected = whole ? "expected a whole number in decimal" : "expected a number in decimal";
  std::size_t at = !whole && !text.empty() && text[0] == '-' ? 1 : 0;
  const std::size_t int_digits = digits_from(text, at);
  if (int_digits > 1 && text[at] == '0') return "write it without leading zeros";
  at += int_digits;
  std::size_t frac_digits = 0;
  if (!whole && at < text.size() && text[at] == '.') {
    frac_digits = digits_from(text, at + 1);
    at += 1 + frac_digits;
  }
  if (int_digits + frac_digits == 0) return expected;
  if (!whole && at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    const std::size_t sign = at + 1 < text.size() && (text[at + 1] == '-' || text[at + 1] == '+') ? 1 : 0;
    const std::size_t exp_digits = digits_from(text, at + 1 + sign);
    if (exp_digits == 0) return expected;
    at += 1 + sign + exp_digits;
  }
  return at == text.size() ? "" : expected;
}

double parse_real(const std::string& text, const std::string& what) {
  std::string why = number_syntax(text, false);
  double v = 0;
  if (why.empty()) {
    errno = 0;
    v = std::strtod(text.c_str(), nullptr);
    if (errno == ERANGE && std::fabs(v) > 1) why = "it is too large for a double";
  }
  if (!why.empty()) throw Error(ErrorKind::parse, what + " is '" + excerpt(text) + "'; " + why);
  return v;
}

long parse_positive(const std::string& text, const std::string& what) {
  const std::string why = number_syntax(text, true);
  const long v = why.empty() && text.size() <= 9 ? std::stol(text) : 0;
  if (v <= 0)
    throw Error(ErrorKind::parse, what + " has '" + text + "', expected a positive integer" +
                                      (why == "write it without leading zeros" ? " without leading zeros" : ""));
  return v;
}

bool is_identifier(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string format_number(double v, const char* printf_format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

std::string shortest(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::uint64_t input_file_size(const std::string& path, const std::string& what, std::uint64_t max_bytes) {
  const std::string name = what + " " + (path.empty() ? "''" : path);
  if (path.empty()) throw Error(ErrorKind::io, what + " is an empty file name; give the path of a file");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(ErrorKind::io, "cannot read " + name + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error(ErrorKind::io, "cannot read " + name + ": it is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::io, "cannot read " + name + ": it is " +
                                   (S_ISFIFO(st.st_mode) ? "a pipe" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket or other special file") +
                                   ", not a regular file; save the input to a file first");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    throw Error(ErrorKind::io, "cannot read " + name + ": it has " + std::to_string(size) + " bytes, more than the " +
                                   std::to_string(max_bytes) + " this input may have");
  return size;
}

std::string read_text_file(const std::string& path, const std::string& what) {
  input_file_size(path, what, std::uint64_t{16} << 20);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::io, "cannot read " + what + " " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string excerpt(const std::string& text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  if (text.size() > max) out += "...";
  return out;
}

std::string size_text(std::size_t bytes) {
  const char* units[] = {"", "K", "M", "G"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, ++u;
  return std::to_string(bytes) + units[u];
}

}  // namespace shardlab
