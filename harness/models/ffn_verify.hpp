// Verifying an FFN run (ffn_run.cpp): the full check against the unsharded layer (ffn_check.hpp), or
// the sketch of every stage against its own gathered inputs (sketch.hpp), each stage on its own
// core. `got` holds each gathered global tensor by name (y, dx, dW_in, dW_out; for a sketch also
// the intermediates h, g, dg, dh).
#pragma once
#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/models/ffn.hpp"

namespace shardlab {

// Runs the tasks on every core (results in task order): independent checks and generators.
template <class R>
std::vector<R> on_all_cores(const std::vector<std::function<R()>>& tasks) {
  std::vector<R> out(tasks.size());
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::exception_ptr failed;  // the first task that threw; rethrown here after every thread is done
  auto work = [&] {
    for (std::size_t i; (i = next++) < tasks.size();) {
      try {
        out[i] = tasks[i]();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed) failed = std::current_exception();
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), tasks.size()));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
  return out;
}

template <class T>
void verify_full(FfnResult& r, const FfnPlan& plan, const FfnInputsOf<T>& in, std::map<std::string, xt::xarray<T>>& got);
template <class T>
void verify_sketch(FfnResult& r, const FfnPlan& plan, const FfnInputsOf<T>& in,
                   std::map<std::string, xt::xarray<T>>& got);

}  // namespace shardlab
