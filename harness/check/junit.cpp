#include "harness/check/junit.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <pugixml.hpp>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

Error io(const std::string& path, const std::string& why) {
  return Error(ErrorKind::io, "cannot write the JUnit file " + path + ": " + why);
}

}  // namespace

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
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw io(path, "it exists and is not a regular file");
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw io(path, "its directory " + dir + " does not exist");
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw io(path, "cannot create a file in " + dir);
    out << junit_xml(suites);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw io(path, "writing failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw io(path, "cannot put the new file in its place");
  }
}

}  // namespace shardlab
