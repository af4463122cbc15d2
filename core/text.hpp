// Tiny text helpers for the parsers in core/.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

std::vector<std::string> split(const std::string& text, char sep);  // keeps empty parts
std::string trim(const std::string& text);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
// One double through a printf format for a double: format_number(0.5, "%.2f") == "0.50".
std::string format_number(double v, const char* printf_format);
// The whole file; Error(io) "cannot read <what> <path>" when it cannot be opened.
std::string read_text_file(const std::string& path, const std::string& what);
// A whole positive integer; otherwise Error(parse): "<what> has 'x', expected a positive integer".
long parse_positive(const std::string& text, const std::string& what);
bool is_identifier(const std::string& text);  // letters, digits, '_' ; not starting with a digit
// Split on `sep` at parenthesis depth 0: "(X,Y),_" -> {"(X,Y)", "_"}.
std::vector<std::string> split_top(const std::string& text, char sep);

}  // namespace shardlab
