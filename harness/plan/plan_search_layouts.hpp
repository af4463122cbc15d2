// The search's inner loop, shared by the functions of plan_search.cpp: what a step costs, and
// Dijkstra over the layouts one tensor can be moved to (harness/plan/plan_search.hpp says which
// moves there are). Internal to the planner: nothing outside harness/plan includes it.
//
// The search holds a layout as a Code (harness/plan/layout_code.hpp): copying, hashing and
// comparing one allocates nothing. Of layouts of equal cost it takes the one whose key comes first.
#pragma once
#include <string>
#include <vector>

#include <tsl/robin_map.h>

#include "harness/cost/cost.hpp"
#include "harness/plan/layout_code.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab::search_detail {

using Axes = std::vector<std::string>;

int axis_of(const Mesh& mesh, const std::string& a);  // index in mesh.names(); throws for an unknown axis
int size_of(const Mesh& mesh, const std::string& a);
int size_of(const Mesh& mesh, const Axes& axes);

// What a path costs: the objective (bytes one device sends, or modeled seconds), then bytes, then
// how many collectives, then the FLOPs per device of the product it multiplies (set at the
// product; steps add none), so ties between products go to the one that computes less.
struct Cost {
  double key = 0;
  std::size_t bytes = 0;
  int collectives = 0;
  double flops = 0;
  bool operator<(const Cost& o) const {
    if (key != o.key) return key < o.key;
    if (bytes != o.bytes) return bytes < o.bytes;
    return collectives != o.collectives ? collectives < o.collectives : flops < o.flops;
  }
  bool operator==(const Cost& o) const {
    return key == o.key && bytes == o.bytes && collectives == o.collectives && flops == o.flops;
  }
  Cost operator+(const Cost& o) const {
    return {key + o.key, bytes + o.bytes, collectives + o.collectives, flops + o.flops};
  }
};

// One step on one tensor: what it does and the spec it leads to.
struct Move {
  StepKind kind = StepKind::contract;
  Axes axes;
  int dim = -1, to_dim = -1;
  Spec after;
};

// The tensor a search runs on: its global shape, element size, and the hardware of a time objective.
struct Subject {
  const Mesh& mesh;
  Shape shape;
  std::size_t element_bytes;
  const Hardware* hw = nullptr;
  // Moves may split a dim that does not divide: only when the problem already has such
  // a dim and the mesh allows it, so that even problems are searched exactly as before.
  bool uneven = false;
};

// A spec that splits some dim of `shape` unevenly, on a mesh that allows it.
bool uneven_split(const Mesh& mesh, const Spec& s, const Shape& shape);
// The block one device holds.
Shape block_shape(const Subject& t, const Spec& s);
Shape block_shape(const Subject& t, const AxisNumbers& axes, const Lay& l);
// The cost of a move from spec `before` (whose block is `local`) to `after`.
Cost step_cost(const Subject& t, const Spec& before, const Spec& after, const Shape& local, StepKind kind,
               const Axes& axes, int dim, int to_dim);

// Dijkstra over the layouts of one tensor from one or more starting layouts (each with a cost
// already paid). States costing more than `bound` are not expanded; with `target` (a key), it
// stops once the target is settled. Settled states keep their cost and how they were reached.
class Layouts {
 public:
  struct Node {
    Code key;   // key_of_code(code)
    Code code;  // partial axes in the order reached
    Cost cost;
    int prev = -1;                       // the state before; -1 at a start
    StepKind kind = StepKind::contract;  // the move from prev
    AxisList axes;                       // its axes
    int dim = -1, to_dim = -1;
    bool settled = false;
  };

  Layouts(const Subject& t, const std::vector<std::pair<Code, Cost>>& starts, double bound,
          const Code* target = nullptr);
  // From Specs (without axes of size 1).
  Layouts(const Subject& t, const std::vector<std::pair<Spec, Cost>>& starts, double bound,
          const Spec* target = nullptr);

  const AxisNumbers& axes() const { return axes_; }
  // Settled states in order of cost.
  const std::vector<int>& settled() const { return settled_; }
  const Node& node(int i) const { return nodes_[static_cast<std::size_t>(i)]; }
  const Node* find(const Spec& s) const { return find_key(axes_.key_of(s)); }
  const Node* find_key(const Code& key) const {
    auto it = index_.find(key);
    return it == index_.end() || !node(it->second).settled ? nullptr : &node(it->second);
  }
  // The start a settled state (by its key) was reached from, and the moves from it, in order.
  std::vector<Move> path_to(const Code& key, Code* start = nullptr) const;
  std::vector<Move> path_to(const Spec& s) const { return path_to(axes_.key_of(s)); }
  Spec spec_of(const Code& code) const { return axes_.spec_of(code); }

 private:
  void run(const Subject& t, const std::vector<std::pair<Code, Cost>>& starts, double bound, const Code* target);

  AxisNumbers axes_;
  tsl::robin_map<Code, int, CodeHash> index_;  // a node's index by its key
  std::vector<Node> nodes_;
  std::vector<int> settled_;
};

}  // namespace shardlab::search_detail
