// Table: aligned text columns for terminal output. Numbers right-aligned, text left-aligned.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string text(const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string human_bytes(double bytes);  // "1.5 KiB"

}  // namespace shardlab
