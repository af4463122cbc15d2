// The search's inner loop, shared by the functions of plan_search.cpp: what a step costs, and
// Dijkstra over the layouts one tensor can be moved to (harness/plan/plan_search.hpp says which
// moves there are). Internal to the planner: nothing outside harness/plan includes it.
//
// The search holds a layout as a short string of letters, 'a' + the axis's index in mesh.names()
// for each mesh axis of each dim, '|' after each dim, then '#' and the partial axes: copying,
// hashing and comparing it allocates nothing for the specs of 4-axis meshes, where a Spec (vectors
// of axis names) allocates for every dim. The key of a layout is that string with its partial
// axes sorted (the order partial sums are listed in means nothing): key_of's text, whose order
// breaks ties between layouts of equal cost.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/cost/cost.hpp"
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
// The cost of a move from spec `before` (whose block is `local`) to `after`.
Cost step_cost(const Subject& t, const Spec& before, const Spec& after, const Shape& local, StepKind kind,
               const Axes& axes, int dim, int to_dim);
// A compact key for a spec: per dim the mesh axis letters, then the partial ones (sorted).
std::string key_of(const Mesh& mesh, const Spec& s);

// A layout in the search's letters, as the search edits it: each dim's axes, and the partial axes.
struct Lay {
  std::vector<std::string> dims;
  std::string partial;
};
void encode(const Lay& l, std::string& code);
void decode(const std::string& code, Lay& l);
std::string key_of_code(const std::string& code);  // the partial axes sorted

// Dijkstra over the layouts of one tensor from one or more starting layouts (each with a cost
// already paid). States costing more than `bound` are not expanded; with `target`, it stops
// once the target is settled. Settled states keep their cost and how they were reached.
class Layouts {
 public:
  struct Node {
    std::string key;   // key_of_code(code)
    std::string code;  // the layout in the search's letters, partial axes in the order reached
    Cost cost;
    int prev = -1;  // the state before; -1 at a start
    StepKind kind = StepKind::contract;  // the move from prev
    std::string axes;                    // its axes, as letters
    int dim = -1, to_dim = -1;
    bool settled = false;
    Spec spec;  // the layout as a Spec, once settled in a search without a target
  };

  Layouts(const Subject& t, const std::vector<std::pair<Spec, Cost>>& starts, double bound,
          const Spec* target = nullptr);

  // Settled states in order of cost.
  const std::vector<std::string>& settled() const { return settled_; }
  const Node* find(const Spec& s) const { return find_key(key_of(mesh_, s)); }
  const Node* find_key(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() || !nodes_[it->second].settled ? nullptr : &nodes_[it->second];
  }
  // The start a settled state was reached from, and the moves from it, in order.
  std::vector<Move> path_to(const Spec& s, Spec* start = nullptr) const;
  Spec spec_of(const std::string& code) const;

 private:
  const Mesh& mesh_;
  std::unordered_map<std::string, int> index_;
  std::vector<Node> nodes_;
  std::vector<std::string> settled_;
};

}  // namespace shardlab::search_detail
