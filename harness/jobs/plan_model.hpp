// The memory and step time of one training layout of a whole model on a cluster. Every term is a
// formula with a source; none is fitted to the measurements it is tested against.
//
// Memory per device (bytes), on the first pipeline stage (it holds the embedding and the most
// stashed micro-batches):
//   states       2 + 2 + 12 bytes a parameter (bf16 weights and gradients, Adam's fp32 master copy,
//                momentum, variance), divided over DP by ZeRO stage (Rajbhandari et al. 2020, Section
//                5; harness/models/zero.hpp); CP replicates the weights, so ZeRO shards over DP x CP
//                (Megatron-LM's distributed optimizer does the same)
//   activations  one layer, one micro-batch (Korthikanti et al. 2022, Section 4, Table 2), over CP
//                (each device holds s / c of every sequence, its scores included):
//                s b h (34 + 5 a s / h) with no parallelism; s b h (10 + 24/t + 5 a s / (h t)) under
//                TP alone; s b h (34 + 5 a s / h) / t with TP+SP. Selective recomputation (Section 5)
//                drops the 5 a s / h term (so does flash attention); full recomputation keeps each
//                layer's input, 2 s b h (/t with SP), plus one layer's working set.
//   stash        1F1B holds min(p, m) micro-batches of its L/p layers at stage 1; interleaved,
//                harness/models/pipeline.hpp's stash_formula (Narayanan et al. 2021, Section 2.2)
// Step time on one device (seconds):
//   compute      GEMM FLOPs at the cluster's measured efficiency, plus the memory-bound kernels
//                (LayerNorm, GeLU, dropout, softmax): twice the stored activations' bytes through
//                HBM per pass (written by one kernel, read by the next), forward 1 pass, backward
//                2, recomputation 1
//   FLOPs        Narayanan et al. 2021, Section 5.1: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) with
//                full recomputation, 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) without; in general 3
//                (or 4) passes of 2 x matmul weights + 4 s h a token a layer, and 6 V h for logits
//   TP           per layer and micro-batch, 2 AllReduces of b s h forward and 2 backward (Shoeybi
//                et al. 2019, Section 3, the f and g operators; 2 more with full recomputation);
//                with SP each is an AllGather plus a ReduceScatter (Korthikanti Section 4.2.2);
//                not overlapped. Over NVLink when TP fits in a node, else over the network.
//   bubble       (p-1)/(v m) of the ideal time (Narayanan Section 2.2; bubble_formula)
//   p2p          each micro-batch's activation forward and gradient backward per virtual stage, b s
//                h / t bytes each with the scatter/gather optimization (Narayanan Section 4.1)
//   DP           an AllReduce of the bf16 gradients over DP x CP, or ZeRO's ReduceScatter + AllGather
//                (the same bytes); ZeRO-2 reduce-scatters every micro-batch and ZeRO-3 gathers the
//                weights twice a micro-batch (article 004, harness/models/three_d.hpp). Exposed
//                unless JobPlanOptions::overlap_dp.
//   CP           ring attention (Liu et al. 2023): each layer passes every device's K/V block of s/c
//                tokens c-1 times forward, and K/V with their gradients (twice the bytes) c-1 times
//                backward, again forward under full recomputation. Each pass overlaps the
//                attention core of the block in hand (4 (s/c)^2 h b / t FLOPs forward, twice
//                backward); only what exceeds it is exposed. Rank order TP, CP, DP, PP.
//   EP           4 AllToAlls of b s k h a MoE layer and micro-batch (harness/models/moe_cost.hpp)
//   optimizer    Adam reads and writes 28 bytes a parameter it owns through HBM
// Collectives are priced by collective_seconds (ring) on the cluster's intra- or inter-node link.
#pragma once
#include <string>
#include <vector>

#include "harness/jobs/job_inputs.hpp"

namespace shardlab {

enum class Recompute { none, selective, full };
std::string recompute_name(Recompute r);  // "none", "selective", "full"

struct Layout {
  int dp = 1, tp = 1, pp = 1, vp = 1, ep = 1;  // vp: virtual stages a device (interleaving)
  int cp = 1;                                  // context parallelism: the sequence over c devices
  bool sp = false;                             // sequence parallelism beside TP
  int zero = 0;                                // ZeRO stage 0-3
  int micro_batch = 1;
  Recompute recompute = Recompute::none;
  int devices() const { return dp * tp * cp * pp; }
  std::string text() const;  // "DP 16 x TP 8+SP x CP 2 x PP 8 (v2), ZeRO-1, b 1, selective"
};

struct JobPlanOptions {
  std::string dtype = "bf16";   // peak FLOP/s used for compute
  bool overlap_dp = false;      // DP communication hidden behind the backward pass
  bool scatter_gather = true;   // PP sends b s h / t from each TP rank (Narayanan Section 4.1)
  // Adam's fp32 copy of the weights, 4 of the optimizer's 12 bytes a parameter. Mixed precision
  // keeps it (ZeRO, Megatron-LM); the JAX scaling book counts bf16 weights and two fp32 moments only.
  bool master_weights = true;
};

struct MemoryParts {
  double params = 0, grads = 0, optimizer = 0;
  double activations = 0;           // with the layout's recomputation, stash included
  double activations_none = 0;      // the same without recomputation
  int stash = 0;                    // micro-batches (or micro-batch and chunk pairs) held
  double total() const { return params + grads + optimizer + activations; }
};

struct TimeParts {
  double compute = 0, tp = 0, bubble = 0, p2p = 0, dp = 0, dp_exposed = 0, ep = 0, optimizer = 0;
  double cp = 0, cp_exposed = 0;  // ring attention's K/V passes, and what the attention core leaves bare
  double step() const { return compute + tp + cp_exposed + bubble + p2p + dp_exposed + ep + optimizer; }
};

struct JobCost {
  Layout layout;
  int micro_batches = 0;           // m, a pipeline's micro-batches a step
  double params_per_device = 0;
  MemoryParts memory;
  TimeParts time;
  double model_flops = 0, hardware_flops = 0;  // a step, the whole job
  bool fits = false;
  double mfu() const;              // model FLOPs / (step x devices x peak)
  double tokens_per_s = 0;
  double achieved_flops = 0;       // hardware FLOPs a second a device (Narayanan's metric)
  double peak = 0;
};

// Why a layout is impossible for this model and device count ("" when it is possible): degrees
// that do not divide heads, layers, the batch, the sequence or the devices.
std::string layout_problem(const ModelSpec& m, const ClusterSpec& c, int devices, const Layout& l);
JobCost job_cost(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const JobPlanOptions& o = {});

// Pieces, exposed for the tests.
double activation_bytes_per_layer(const ModelSpec& m, int micro_batch, const Layout& l, Recompute r);
double step_flops(const ModelSpec& m, Recompute r);  // the whole global batch, one step
double step_flops_logits(const ModelSpec& m);        // its output layer's share (forward and backward)
// One device's FLOPs a step on the slowest (last) pipeline stage: its layers and the output layer.
double stage_flops(const ModelSpec& m, const Layout& l);
// The TP communication of one step on `link` (the layout's own, or another to compare).
double tp_seconds(const ModelSpec& m, const Layout& l, const Hardware& link);
double device_params(const ModelSpec& m, const Layout& l);  // on the first stage, over TP and EP
// One device's attention-core FLOPs a step (QK^T and AV, forward, backward and any recomputation):
// what hides ring attention's passes.
double attention_core_flops(const ModelSpec& m, const Layout& l);
int micro_batches(const ModelSpec& m, const Layout& l);     // m: a pipeline's micro-batches a step

// The byte model: one communication term of a step on one device, `count` calls of `op` ("send"
// for a pipeline's point-to-point) over a group of `group` devices, each on a tensor of `bytes`
// (the whole tensor, as collective_seconds takes it). The step time prices these terms; the
// miniature run (job_miniature.hpp) checks the bytes they send against a run's ledger.
struct CommTerm {
  std::string part, op;  // part: "TP", "CP", "P2P", "DP", "EP"
  int group = 1;
  double bytes = 0, count = 0;
};
// The terms of a device on pipeline stage `stage` (-1: an interior stage, which sends both ways),
// tensors of `element_bytes` a value.
std::vector<CommTerm> comm_terms(const ModelSpec& m, const Layout& l, int stage, double element_bytes,
                                 bool scatter_gather);
double comm_term_seconds(const CommTerm& t, const Hardware& link);
// Bytes member `member` of the group sends for the term (collectives/predict.hpp's ring arithmetic).
double comm_term_bytes_sent(const CommTerm& t, std::size_t element_bytes, int member);
bool tp_inside_node(const ClusterSpec& c, const Layout& l);

}  // namespace shardlab
