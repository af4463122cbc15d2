#include "harness/check/junit.hpp"
#include "core/write_file.hpp"

#include <sstream>

#include <pugixml.hpp>

#include "core/text.hpp"

namespace shardlab {

std::string junit_xml(const std::vector<JunitSuite>& suites) {
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  auto root = doc.append_child("testsuites");
  root.append_attribute("name") = "shardlab check";
  int tests = 0, failures = 0, errors = 0;
  for (const auto& s : suites) {
    auto suite = root.append_child("testsuite");
    int f = 0, e = 0;
    for (const auto& c : s.cases) {
      f += !c.pass && !c.error;
      e += c.error;
    }
    suite.append_attribute("name") = s.name.c_str();
    suite.append_attribute("tests") = static_cast<int>(s.cases.size());
    suite.append_attribute("failures") = f;
    suite.append_attribute("errors") = e;
    suite.append_attribute("time") = format_number(s.seconds, "%.3f").c_str();
    for (const auto& c : s.cases) {
      auto tc = suite.append_child("testcase");
      tc.append_attribute("classname") = s.name.c_str();
      tc.append_attribute("name") = c.name.c_str();
      tc.append_attribute("time") = format_number(c.seconds, "%.3f").c_str();
      if (c.power >= 0) {
        auto props = tc.append_child("properties");
        for (const auto& [key, value] : {std::pair<const char*, double>{"power", c.power}, {"power_floor", c.power_floor}}) {
          auto p = props.append_child("property");
          p.append_attribute("name") = key;
          p.append_attribute("value") = format_number(value, "%.3g").c_str();
        }
      }
      if (c.pass) continue;
      auto why = tc.append_child(c.error ? "error" : "failure");
      why.append_attribute("message") = c.message.c_str();
      why.text().set(c.message.c_str());
    }
    tests += static_cast<int>(s.cases.size());
    failures += f;
    errors += e;
  }
  root.append_attribute("tests") = tests;
  root.append_attribute("failures") = failures;
  root.append_attribute("errors") = errors;
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

void write_junit(const std::string& path, const std::vector<JunitSuite>& suites) {
  write_file_whole(path, "the JUnit file", [&](std::ostream& out) { out << junit_xml(suites); });
}

}  // namespace shardlab
