// Article 002's nested mesh as one model: GSPMD's Transformer example, where the two axes of one
// X x Y mesh (4 x 4 in the article) take a different job in each part of the model. Forward only.
//
//   embedding   tokens' batch over X (data parallelism), the table's vocabulary rows over Y: each
//               device looks up the tokens whose id falls in its rows (zeros for the rest), and a
//               ReduceScatter over Y sums those partial rows and leaves each device B/(X Y) of them.
//   to stages   the encoder wants the batch as micro-batches flowing through stages: batch block x
//               becomes micro-batch x, so device (x, y) sends its rows to stage 0, device (0, y).
//   encoder     X stages of L/X MoE layers each (stage x on the devices with that x), experts over
//               Y: a layer routes each token to its top-k experts (capacity C per expert and group),
//               an AllToAll over Y takes the tokens to their experts' devices and one brings the
//               results back; h = h + sum_k gate_k expert_k(h). Each micro-batch's activation goes
//               from stage x to x+1 by a send over X (GPipe's forward order).
//   to batch    the last stage sends micro-batch c back to the devices of batch block c.
//   softmax     batch over X again, vocabulary over Y: an AllGather over Y of the rows, logits for
//               the device's vocabulary columns, the row's max and sum of exponentials each an
//               AllReduce over Y.
//
// Experts: relu(h W_in[e]) W_out[e] of moe_expert.hpp, routed by route_token (larger logit first).
// Groups for capacity: the r = B/(X Y) consecutive tokens a device holds of one micro-batch.
// Every stored value is rounded to the run's element type, at the same points in the reference.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/mesh.hpp"
#include "core/tensor.hpp"
#include "harness/check/report.hpp"

namespace shardlab {

struct NestedShape {
  std::size_t batch = 64;   // tokens B
  std::size_t vocab = 32;   // V
  std::size_t model = 8;    // m, the width between layers
  std::size_t hidden = 16;  // h, each expert's
  int experts = 8, top_k = 2;
  double capacity_factor = 2.0;
  int layers = 4;  // MoE layers in the encoder, L/X per stage
};

// tokens [B] (ids in [0, V)); embed [V, m]; unembed [m, V]; per layer router [m, E], w_in
// [E, m, h], w_out [E, h, m]. Small integers over powers of two: exact in every element type.
struct NestedInputs {
  Tensor tokens, embed, unembed;
  std::vector<Tensor> router, w_in, w_out;
};
NestedInputs nested_inputs(const NestedShape& s, std::uint64_t seed);

// Error(parse), one sentence naming the flag, for a mesh of other than 2 axes, sizes out of range,
// or a batch, vocabulary, expert count or layer count its axis does not divide.
// Error(unsupported) when nested_work passes kNestedLimitWork, or nested_run_bytes kNestedLimitBytes
// or the machine's memory.
void check_nested(const NestedShape& s, const Mesh& mesh);
// Multiply-adds of a run, the devices' and the reference's: every group's expert slots (empty ones
// too) and every token's kept experts, its router logits, and the vocabulary's logits.
double nested_work(const NestedShape& s, const Mesh& mesh);
constexpr double kNestedLimitWork = 1e9;  // a few seconds of these scalar loops
// Bytes a run holds at once, in float64: the weights, every device's four [E, C, m] buffers of one
// MoE layer (and the experts' output), and six [B, V] tensors of the softmax (the devices' blocks,
// the reference, its tolerance, its logits, the stitched result, the comparison).
double nested_run_bytes(const NestedShape& s, const Mesh& mesh);
constexpr double kNestedLimitBytes = 1024.0 * 1024 * 1024;  // a lesson-sized run: seconds, not minutes
// C = ceil(capacity_factor * top_k * r / E), at least 1, with r = B/(X Y) tokens in a group.
std::size_t nested_capacity(const NestedShape& s, const Mesh& mesh);

// Device (x, y)'s program. Outputs, row blocks over (X, Y) unless said: "embedded" [r, m] after the
// embedding, "encoded" [r, m] after the encoder, back in the batch layout; "p" [B/X, V/Y], the
// softmax (rows over X, vocabulary over Y); "dropped_count" [1], assignments its groups dropped.
SpmdProgram nested_program(const NestedShape& s, const NestedInputs& in);

// The same model on one device: the whole batch, every layer in order, whole tables.
struct NestedReference {
  Tensor embedded, encoded, p;
  Tensor p_tolerance;  // per element: what the sharded sum over the vocabulary may move p by
  double dropped = 0, assignments = 0;
};
NestedReference nested_reference(const NestedShape& s, const NestedInputs& in, const Mesh& mesh, DType t);

// The parts of the model, in order, and the ledger's tensor names that belong to each.
struct NestedPart {
  std::string name, x_job, y_job, moves;
};
const std::vector<NestedPart>& nested_parts();
// The part a ledger row's tensor belongs to ("" if none).
std::string nested_part_of(const std::string& tensor);
// Bytes device `device` sends in each part, by the model's formulas (each collective's ring or
// pairwise bytes, each send's rows).
std::map<std::string, double> nested_bytes(const NestedShape& s, const Mesh& mesh, int device, std::size_t element_bytes);

// The run checked on the root: the three outputs against the reference (embedded and encoded
// exact, p within p_tolerance), and every device's bytes per part against nested_bytes.
std::vector<Verdict> nested_checks(const NestedShape& s, const Mesh& mesh, const RunResult& run,
                                   const NestedReference& ref, std::size_t element_bytes);

// For people: each part's bytes, the busiest device's from the ledger beside the formula for that
// device and the sum over devices; each part's busiest bytes and sum go into `numbers` as
// bytes_<part> and bytes_all_<part>.
std::string nested_bytes_table(const NestedShape& s, const Mesh& mesh, const RunResult& run, std::size_t element_bytes,
                               std::map<std::string, double>& numbers, const std::string& indent = "  ");

// The model on sim threads in a runtime of its own (lesson 17 runs it beside its own mesh), in
// element type t, compared with its replay in bfloat16 as a session does: the checks (replayed
// where the replay agreed, and a replay check), the run, and the reference.
struct NestedRun {
  RunResult run;
  NestedReference ref;
  std::vector<Verdict> checks;
};
NestedRun run_nested_sim(const NestedShape& s, const Mesh& mesh, DType t, std::uint64_t seed);

}  // namespace shardlab
