// Reuse of a sketch check's reference side across runs that check the same operands.
//
// sketch_product (sketch.hpp) spends most of its time on what depends on op(A), op(B) and its
// options alone: the projections A (B V), the sampled rows recomputed in double, the float32
// recomputation of the calibration. Only the comparison reads C. A run that checks several results
// of the same operands (lesson 10: three layouts of one layer, whose stages read bit-identical
// operands) computes that side once while a SketchReuse is alive, and each later check looks it up
// by a key holding the operands' shapes, the options and a 128-bit XXH3 fingerprint of each
// operand's bytes (libxxhash: one pass over the data at memory speed). A check whose operands differ
// in one bit gets a different key and computes its own. Outside a SketchReuse nothing is kept.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace shardlab {

// XXH3's 128-bit hash of `bytes` bytes at `data`, as 32 hex digits.
std::string fingerprint(const void* data, std::size_t bytes);

// While one is alive (on any thread), sketch_product keeps and reuses reference sides; the last
// one to end frees them. Not copyable.
class SketchReuse {
 public:
  SketchReuse();
  ~SketchReuse();
  SketchReuse(const SketchReuse&) = delete;
  SketchReuse& operator=(const SketchReuse&) = delete;
};

namespace sketch_memo {
// Entries kept at most, the oldest dropped first; and the bytes they may hold together.
constexpr std::size_t kEntries = 16;
constexpr std::size_t kBytes = std::size_t(1) << 30;

bool active();  // a SketchReuse is alive
// The value kept under `key`, or null (also when no SketchReuse is alive). Thread-safe.
std::shared_ptr<const void> find(const std::string& key);
// Keeps `value` (`bytes` its size) under `key` when a SketchReuse is alive; a value larger than
// kBytes is not kept. Thread-safe.
void keep(const std::string& key, std::shared_ptr<const void> value, std::size_t bytes);
// Lookups that found a value, since the process started: what a test reads to see reuse happen.
std::size_t hits();
}  // namespace sketch_memo

}  // namespace shardlab
