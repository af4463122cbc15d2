// Tiny text helpers for the parsers in core/.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {

std::vector<std::string> split(const std::string& text, char sep);  // keeps empty parts
std::string trim(const std::string& text);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
// One double through a printf format for a double: format_number(0.5, "%.2f") == "0.50".
std::string format_number(double v, const char* printf_format);
// A double as a stream prints it by default (6 significant digits): shortest(0.25) == "0.25".
std::string shortest(double v);
// 65536 -> "64K", 1048576 -> "1M", 1000 -> "1000": whole powers of 1024 only, as nccl-tests sizes.
std::string size_text(std::size_t bytes);
// The size in bytes of an input file that is safe to read whole: it must exist and be a regular
// file (a FIFO would block forever, /dev/zero never ends, a directory has no bytes) of at most
// max_bytes. Otherwise Error(io), one sentence naming <what> and the path.
std::uint64_t input_file_size(const std::string& path, const std::string& what, std::uint64_t max_bytes);
// The whole file (a regular file of at most 16 MiB); Error(io) naming <what> <path> otherwise.
std::string read_text_file(const std::string& path, const std::string& what);
// The one syntax of every number a user types (a flag's value, --dims, a mesh, perturb:E), in
// decimal only: a whole number is digits with no leading zero ("0" aside), so "010" and "0x10" are
// refused rather than read as octal or hex; a real number may add a leading '-', a fraction and an
// exponent (-1.5e-3, .5, 2.) and is never hex, "inf" or "nan". "" when `text` is well formed, else
// why not ("expected a whole number in decimal"), to follow "<what> is '<text>'; ".
std::string number_syntax(const std::string& text, bool whole);
// A finite real number as number_syntax reads it; otherwise Error(parse): "<what> is 'x'; <why>".
double parse_real(const std::string& text, const std::string& what);
// A whole positive integer (number_syntax); otherwise Error(parse): "<what> has 'x', expected a
// positive integer".
long parse_positive(const std::string& text, const std::string& what);
bool is_identifier(const std::string& text);  // letters, digits, '_' ; not starting with a digit
// What a user typed, safe to quote in a one-line error: at most `max` characters, each byte
// outside printable ASCII shown as '?' (so no control sequence reaches the terminal and no UTF-8
// character is cut in half), "..." after a cut.
std::string excerpt(const std::string& text, std::size_t max = 40);
// Split on `sep` at parenthesis depth 0: "(X,Y),_" -> {"(X,Y)", "_"}.
std::vector<std::string> split_top(const std::string& text, char sep);

}  // namespace shardlab
