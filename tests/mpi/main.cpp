// build/bin/mpi_tests: the MPI doctest suite, run under mpiexec (make test-mpi: -n 2 and -n 8).
// Every rank runs every test case, since the programs inside are SPMD. Rank 0 prints doctest's
// report; the other ranks print only their failures; every rank exits with the worst status.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <exception>
#include <iostream>
#include <sstream>

#include "collectives/mpi.hpp"

namespace {
// Counts test cases for the closing "N passed, N failed" line.
struct Counts : doctest::IReporter {
  static inline int passed = 0, failed = 0;
  explicit Counts(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override {
    failed = static_cast<int>(s.numTestCasesFailed);
    passed = static_cast<int>(s.numTestCasesPassingFilters) - failed;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("counts", 1, Counts);
}  // namespace

int main(int argc, char** argv) {
  try {
    shardlab::mpi::start();
  } catch (const std::exception& e) {  // e.g. the mpi backend's module missing: one sentence, exit 3
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  }
  const int rank = shardlab::mpi::rank();
  const int size = shardlab::mpi::world_size();
  doctest::Context context(argc, argv);
  std::ostringstream quiet;
  if (rank != 0) context.setCout(&quiet);
  const int result = context.run();
  if (context.shouldExit()) return result;
  if (result != 0 && rank != 0) std::cerr << "---- mpi_tests rank " << rank << " ----\n" << quiet.str() << std::flush;
  const int failed = shardlab::mpi::agree(Counts::failed);  // the most failures on any rank
  const int status = shardlab::mpi::agree(result != 0 ? 1 : 0);
  if (rank == 0)
    std::cout << "mpi_tests on " << size << (size == 1 ? " rank: " : " ranks: ") << Counts::passed + Counts::failed - failed << " passed, "
              << failed << " failed\n";
  return status;
}
