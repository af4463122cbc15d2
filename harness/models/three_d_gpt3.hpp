// GPT-3 (96 layers, h = 12288, about 174e9 weights: 12 h^2 a layer) split over a D x P x T mesh as
// lesson 17's model is, by formula: what one training step moves per device over each axis, what
// that costs on a link, and what each ZeRO stage would move and keep over D. Article 004's batch:
// micro-batches of 8 x 2048 tokens, 32 of them a step, bfloat16 (2 B) on the wire.
//
// Every term follows the mesh: an axis of one device moves nothing and makes no call; P carries
// activations forward and gradients back only between stages (a first or last stage sends one
// way, a middle stage both ways); T all-reduces 4 times a layer (Megatron: 2 forward, 2 backward)
// for every micro-batch; D reduce-scatters the gradients and all-gathers the updated weights.
#pragma once
#include <string>
#include <vector>

#include "harness/cost/cost.hpp"

namespace shardlab {

struct Gpt3Shape {
  double layers = 96, hidden = 12288, tokens = 8 * 2048, micro_batches = 32, element_bytes = 2;
  double weights() const { return 12 * hidden * hidden * layers; }
};

// One axis's traffic per device and step, on its busiest device.
struct Gpt3Axis {
  std::string name;     // "T", "P", "D"
  int size = 1;         // devices along the axis
  std::string moves;    // in words
  double calls = 0;     // collective calls (or sends) a step; 0 when the axis moves nothing
  double steps = 0;     // messages per call (ring steps; 1 for a send)
  double bytes = 0;     // bytes sent a step
};
std::vector<Gpt3Axis> gpt3_axes(int D, int P, int T, const Gpt3Shape& g = {});  // T, P, D in that order

// Launch and alpha per call and message, plus bytes over the link's bandwidth; 0 for no calls.
double gpt3_axis_seconds(const Gpt3Axis& a, const Hardware& link);

// Which axis to keep on the fast links when one of them can be: the one whose traffic costs the
// most more on the slow link than on the fast one. "" when no axis moves anything.
std::string gpt3_keep_inside(const std::vector<Gpt3Axis>& axes, const Hardware& fast, const Hardware& slow);

// ZeRO over D beside a pipeline (article 004): bytes and calls a step per device over D for stage
// 1, 2 and 3, and gradient and optimizer memory per device.
struct Gpt3Zero {
  double d_bytes[4] = {0, 0, 0, 0};  // by stage 1..3 (index 0 unused)
  double d_calls[4] = {0, 0, 0, 0};
  double grads_whole_gb = 0;         // every weight's gradient on one device (pure DP, no TP or PP)
  double grads_here_gb = 0;          // this split's: 1/(P T) of them
  double states_here_gb = 0;         // Adam's fp32 master, m and v (12 B a weight), 1/(P T)
};
Gpt3Zero gpt3_zero(int D, int P, int T, const Gpt3Shape& g = {});

}  // namespace shardlab
