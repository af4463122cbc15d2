// JUnit XML for `shardlab check` (written with pugixml): one <testsuite> per case file, one
// <testcase> per check (each output's verification, each expectation, memory), a comparison's
// with <properties> power and power_floor; a file that could not be read or planned is one
// testcase with an <error>.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

struct JunitCase {
  std::string name;
  bool pass = true;
  bool error = false;    // the file is invalid: an <error>, not a <failure>
  std::string message;   // why it failed or erred
  double seconds = 0;
  // A comparison of values: its power and floor (verify.hpp), written as the testcase's
  // properties "power" and "power_floor"; negative: none (no property).
  double power = -1, power_floor = -1;
};

struct JunitSuite {
  std::string name;  // the case file's path
  std::vector<JunitCase> cases;
  double seconds = 0;
};

// The whole document as text.
std::string junit_xml(const std::vector<JunitSuite>& suites);
// Writes it to `path`: Error(io) when it cannot; the file is written whole or not at all (a
// temporary beside it renamed over it; a path that is not a regular file is refused).
void write_junit(const std::string& path, const std::vector<JunitSuite>& suites);

}  // namespace shardlab
