#include "harness/check/sketch_memo.hpp"

#include <cstdio>
#include <deque>
#include <mutex>
#include <utility>

#define XXH_INLINE_ALL  // header only: nothing to link
#include <xxhash.h>

namespace shardlab {

std::string fingerprint(const void* data, std::size_t bytes) {
  const XXH128_hash_t h = XXH3_128bits(data, bytes);
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return text;
}

namespace {

struct Entry {
  std::string key;
  std::shared_ptr<const void> value;
  std::size_t bytes = 0;
};

struct Memo {
  std::mutex lock;
  int scopes = 0;             // SketchReuse objects alive
  std::deque<Entry> entries;  // oldest first
  std::size_t bytes = 0, hits = 0;
};

Memo& memo() {
  static Memo m;
  return m;
}

}  // namespace

SketchReuse::SketchReuse() {
  Memo& m = memo();
  const std::lock_guard<std::mutex> g(m.lock);
  ++m.scopes;
}

SketchReuse::~SketchReuse() {
  Memo& m = memo();
  std::deque<Entry> freed;  // released outside the lock
  {
    const std::lock_guard<std::mutex> g(m.lock);
    if (--m.scopes > 0) return;
    freed.swap(m.entries);
    m.bytes = 0;
  }
}

namespace sketch_memo {

bool active() {
  Memo& m = memo();
  const std::lock_guard<std::mutex> g(m.lock);
  return m.scopes > 0;
}

std::shared_ptr<const void> find(const std::string& key) {
  Memo& m = memo();
  const std::lock_guard<std::mutex> g(m.lock);
  if (m.scopes == 0) return nullptr;
  for (const Entry& e : m.entries)
    if (e.key == key) {
      ++m.hits;
      return e.value;
    }
  return nullptr;
}

void keep(const std::string& key, std::shared_ptr<const void> value, std::size_t bytes) {
  Memo& m = memo();
  std::deque<Entry> dropped;  // released outside the lock
  const std::lock_guard<std::mutex> g(m.lock);
  if (m.scopes == 0 || bytes > kBytes) return;
  for (const Entry& e : m.entries)
    if (e.key == key) return;  // two threads computed the same side: the first one kept stays
  while (!m.entries.empty() && (m.entries.size() >= kEntries || m.bytes + bytes > kBytes)) {
    m.bytes -= m.entries.front().bytes;
    dropped.push_back(std::move(m.entries.front()));
    m.entries.pop_front();
  }
  m.entries.push_back(Entry{key, std::move(value), bytes});
  m.bytes += bytes;
}

std::size_t hits() {
  Memo& m = memo();
  const std::lock_guard<std::mutex> g(m.lock);
  return m.hits;
}

}  // namespace sketch_memo

}  // namespace shardlab
