// Runs a built program for tests: binaries live in $SHARDLAB_BIN (default build/bin).
#pragma once
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace shardlab::testing {

struct Ran {
  int status = -1;     // exit status
  std::string out;     // stdout
  std::string err;     // stderr
};

inline std::string bin_dir() {
  const char* d = std::getenv("SHARDLAB_BIN");
  return d ? d : "build/bin";
}

// `line` through the shell: its stdout, its stderr (kept apart through a file) and exit status.
inline Ran run_line(const std::string& line) {
  static int counter = 0;
  const std::string err_file = "/tmp/shardlab_test_stderr_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string full = line + " 2>" + err_file;
  Ran r;
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int raw = ::pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (FILE* e = std::fopen(err_file.c_str(), "r")) {
    while ((n = std::fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    std::fclose(e);
  }
  std::remove(err_file.c_str());
  return r;
}

// `command` starts with the program name relative to bin_dir(), e.g. "02_reduction_allreduce --json".
// `prefix` goes in front (e.g. "mpiexec -n 8 "). A run that hangs is killed after 5 minutes and
// reports status 124 (timeout's), so a hang fails its test instead of stalling the suite.
inline Ran run_binary(const std::string& command, const std::string& prefix = "") {
  return run_line("timeout -k 10 300 " + prefix + bin_dir() + "/" + command);
}

// The prefix of a nested mpiexec run: a clean environment, so the child does not join this job's
// process manager (env -i drops its PMI variables), with four settings carried over when set, each
// only a matter of start-up time: OPENBLAS_CORETYPE, SHARDLAB_CHOSE_CORETYPE and GLIBC_TUNABLES are
// the choice core/blas.cpp re-executes a program to make, so each rank need not make it again; and
// HWLOC_COMPONENTS=-linuxio (the Makefile's test targets set it) stops MPICH's hwloc reading every
// PCI device's config space in MPI_Init, about 20-30 ms of each launch here.
inline std::string clean_env() {
  std::string env = "env -i PATH=\"$PATH\" HOME=\"$HOME\" ";
  for (const char* name : {"OPENBLAS_CORETYPE", "SHARDLAB_CHOSE_CORETYPE", "GLIBC_TUNABLES", "HWLOC_COMPONENTS"})
    if (const char* v = std::getenv(name)) env += std::string(name) + "='" + v + "' ";
  return env;
}

// clean_env() and `mpiexec -n N` with one BLAS thread a rank: the launch prefix of run_binary for a
// nested run on N processes.
inline std::string clean_mpiexec(int n) {
  return clean_env() + "OPENBLAS_NUM_THREADS=1 mpiexec -n " + std::to_string(n) + " ";
}

// Every run of spaces and newlines as one space: text as read, whatever the 100-column wrapping of a
// lesson's lines (core/wrap.hpp) did to it.
inline std::string flat(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\n';
    if (space && !out.empty() && out.back() == ' ') continue;
    out += space ? ' ' : c;
  }
  return out;
}

// `s` as one shell word: in single quotes, each ' in it written '\''.
inline std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `command` as a user would paste it into a shell: through sh -c (quoted so that its own quotes
// stay as typed), killed after `timeout_s` seconds; `redirect` follows (e.g. "</dev/null >/dev/null
// 2>&1"). Returns the exit status, -1 when a signal ended it.
inline int shell_status(const std::string& command, int timeout_s, const std::string& redirect) {
  const std::string line = "timeout -k 10 " + std::to_string(timeout_s) + " sh -c " + shell_quoted(command) + " " + redirect;
  const int raw = std::system(line.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

// `s` without the spaces and tabs around it.
inline std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace shardlab::testing
