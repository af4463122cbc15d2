#include "harness/jobs/plan_model.hpp"

#include <algorithm>

#include "core/text.hpp"
#include "collectives/predict.hpp"
#include "harness/models/pipeline.hpp"

namespace shardlab {

std::string recompute_name(Recompute r) {
  return r == Recompute::none ? "none" : r == Recompute::selective ? "selective" : "full";
}

std::string Layout::text() const {
  std::string s = "DP " + std::to_string(dp) + " x TP " + std::to_string(tp) + (sp ? "+SP" : "") + " x PP " +
                  std::to_string(pp) + (vp > 1 ? " (v" + std::to_string(vp) + ")" : "");
  if (cp > 1) s.insert(s.find(" x PP"), " x CP " + std::to_string(cp));
  if (ep > 1) s += " x EP " + std::to_string(ep);
  return s + ", ZeRO-" + std::to_string(zero) + ", b " + std::to_string(micro_batch) + ", " + recompute_name(recompute);
}

double JobCost::mfu() const {
  const double step = time.step();
  return step > 0 ? model_flops / (step * layout.devices() * peak) : 0;
}

std::string layout_problem(const ModelSpec& m, const ClusterSpec& c, int devices, const Layout& l) {
  if (l.devices() != devices) return "DP x TP x CP x PP is not the device count";
  if (m.heads % l.tp || m.kv_heads % std::min(l.tp, m.kv_heads) || m.ffn % l.tp) return "TP does not divide the heads";
  if (m.layers % (l.pp * l.vp)) return "PP x virtual stages does not divide the layers";
  const double per_replica = m.global_batch / l.dp;
  if (per_replica != static_cast<long long>(per_replica)) return "DP does not divide the batch";
  const long long b = static_cast<long long>(per_replica);
  if (b % l.micro_batch) return "the micro-batch does not divide a replica's batch";
  const long long mb = b / l.micro_batch;
  if (l.vp > 1 && (l.pp < 2 || mb % l.pp)) return "interleaving needs PP >= 2 and micro-batches a multiple of PP";
  if (l.sp && l.tp < 2) return "SP needs TP";
  // Ring attention balances causal work by giving each device two of 2c blocks of the sequence.
  if (l.cp > 1 && (!m.attention || m.seq % (2 * l.cp))) return "CP needs attention and 2 CP blocks to divide the sequence";
  if (l.ep > 1 && (!m.moe() || m.experts % l.ep || l.dp % l.ep)) return "EP must divide the experts and DP";
  if (c.max_nodes > 0 && devices > c.max_nodes * c.devices_per_node) return "more devices than the cluster has";
  return "";
}

namespace {

// Korthikanti et al. 2022's per-layer terms, generalized to grouped-query attention, any FFN
// width, SwiGLU and top-k experts: the parts every TP rank holds whole, and the parts TP splits.
struct ActTerms {
  double whole = 0, split = 0, scores = 0;  // bytes per (s b); scores: 5 a s, split by TP
};

ActTerms act_terms(const ModelSpec& m) {
  const double h = m.hidden, f = m.ffn, kv = double(m.kv_heads) / m.heads;
  ActTerms t;
  // Attention: LayerNorm output into QKV (2h) and the output dropout mask (h) are whole; Q (2h),
  // K and V (2h each, fewer with GQA), and the output projection's input (2h) are split.
  // MLP: its input (2h) and dropout mask (h) whole; the activation's input and output, 2f each
  // (SwiGLU: gate and up 2f each, then 2f), split, once per expert a token visits.
  // LayerNorms: their inputs, 2h each, whole. For the GPT block: whole 10h, split 24h.
  t.whole = 3 * h + 3 * h + 4 * h;
  t.split = 2 * h + 4 * h * kv + 2 * h + (m.gated_ffn ? 6 : 4) * f * std::max(1, m.top_k);
  if (!m.flash_attention) t.scores = 5.0 * m.heads * m.seq;
  return t;
}

double matmul_params(const ModelSpec& m) {  // a layer's matmul weights a token uses
  const double h = m.hidden, hd = h / m.heads;
  const double attn = m.attention ? 2 * h * h + 2 * h * m.kv_heads * hd : 0;
  return attn + (m.gated_ffn ? 3 : 2) * h * m.ffn * std::max(1, m.top_k);
}

const Hardware& link_for(const ClusterSpec& c, bool inside) { return inside ? c.intra : c.inter; }

}  // namespace

double activation_bytes_per_layer(const ModelSpec& m, int b, const Layout& l, Recompute r) {
  const double sb = double(m.seq) / l.cp * b, t = l.tp;
  const ActTerms a = act_terms(m);
  if (r == Recompute::full) return 2.0 * m.hidden * sb / (l.sp ? t : 1);
  const double scores = r == Recompute::selective ? 0 : a.scores;
  if (l.sp) return sb * (a.whole + a.split + scores) / t;
  return sb * (a.whole + (a.split + scores) / t);
}

double step_flops(const ModelSpec& m, Recompute r) {
  const double tokens = m.global_batch * m.seq;
  const double layer_fwd = 2 * matmul_params(m) + (m.attention ? 4.0 * m.seq * m.hidden : 0);
  const double logits = 2.0 * m.vocab * m.hidden;
  double passes = 3 * (m.layers * layer_fwd + logits);
  if (r == Recompute::full) passes += m.layers * layer_fwd;
  if (r == Recompute::selective) passes += m.layers * 4.0 * m.seq * m.hidden;  // the attention core again
  return tokens * passes;
}

double stage_flops(const ModelSpec& m, const Layout& l) {
  // The last stage's share: its layers, the output layer and the loss. A pipeline runs at the
  // pace of its slowest stage, so the logits are not spread over the stages (with PP 1 this is
  // the whole model's FLOPs over TP and DP).
  const double all = step_flops(m, l.recompute), logits = step_flops_logits(m);
  return ((all - logits) / l.pp + logits) / (double(l.dp) * l.tp * l.cp);
}

double attention_core_flops(const ModelSpec& m, const Layout& l) {
  if (!m.attention) return 0;
  // A token's queries meet all s keys: 4 s h FLOPs forward (QK^T and AV), split over TP heads; the
  // backward twice that, and selective or full recomputation runs the forward's again.
  const double passes = l.recompute == Recompute::none ? 3 : 4;
  const double tokens = m.global_batch * m.seq / (double(l.dp) * l.cp);
  return passes * tokens * 4.0 * m.seq * m.hidden / l.tp * m.layers / l.pp;
}

double step_flops_logits(const ModelSpec& m) { return m.global_batch * m.seq * 3 * 2.0 * m.vocab * m.hidden; }

bool tp_inside_node(const ClusterSpec& c, const Layout& l) { return l.tp <= c.devices_per_node; }

double device_params(const ModelSpec& m, const Layout& l) {
  // Parameters on the first stage: its layers (experts over EP too) and the input embedding.
  const double dense_layer = layer_params(m) - expert_params(m);
  double pd = double(m.layers) / l.pp * (dense_layer / l.tp + expert_params(m) / (l.tp * l.ep));
  pd += (double(m.vocab) * m.hidden) / l.tp + (m.learned_positions ? double(m.seq) * m.hidden : 0);
  if (l.pp == 1 && !m.tied_embeddings) pd += double(m.vocab) * m.hidden / l.tp;
  return pd;
}

int micro_batches(const ModelSpec& m, const Layout& l) {
  return static_cast<int>(m.global_batch / l.dp / l.micro_batch);
}

std::vector<CommTerm> comm_terms(const ModelSpec& m, const Layout& l, int stage, double element_bytes,
                                 bool scatter_gather) {
  std::vector<CommTerm> v;
  const double mb = micro_batches(m, l), layers_here = double(m.layers) / l.pp;
  const double act = element_bytes * m.seq / l.cp * l.micro_batch * m.hidden;  // b s h, over CP
  const bool first = stage == 0, last = stage == l.pp - 1;
  if (l.tp > 1) {
    // Per layer and micro-batch: an f/g pair for attention and one for the MLP, each reducing
    // once forward and once backward; full recomputation runs the forward's again. Without an
    // embedding the first layer's input gradient goes nowhere, so it is not reduced.
    const double blocks = m.attention ? 2 : 1, fwd = blocks * (l.recompute == Recompute::full ? 2 : 1);
    const double count = layers_here * mb * (fwd + blocks) - (first && m.vocab == 0 ? mb : 0);
    if (l.sp) {
      v.push_back({"TP", "all_gather", l.tp, act, count});
      v.push_back({"TP", "reduce_scatter", l.tp, act, count});
    } else {
      v.push_back({"TP", "all_reduce", l.tp, act, count});
    }
  }
  if (l.cp > 1) {
    // Ring attention: a device's K and V block (its TP rank's share of the KV heads) goes round the
    // ring c-1 times forward; backward K/V travel again with their gradients, twice the bytes.
    const double kv_heads_here = double(m.kv_heads) / std::min(l.tp, m.kv_heads), head = double(m.hidden) / m.heads;
    const double kv = element_bytes * 2 * (double(m.seq) / l.cp) * l.micro_batch * kv_heads_here * head;
    const double passes = l.recompute == Recompute::full ? 4 : 3;  // forward 1, backward 2, recompute 1
    v.push_back({"CP", "send", l.cp, kv, layers_here * mb * (l.cp - 1) * passes});
  }
  if (l.pp > 1) {
    // Each micro-batch's activation on and its gradient back, per virtual stage; the very first
    // chunk receives no gradient to pass back and the very last sends nothing on.
    const double sends = mb * (2.0 * l.vp - (first ? 1 : 0) - (last ? 1 : 0));
    v.push_back({"P2P", "send", 2, scatter_gather ? act / l.tp : act, sends});
  }
  if (l.dp * l.cp > 1) {
    // CP ranks hold the same weights and see other tokens: their gradients are summed with DP's.
    const double g = element_bytes * device_params(m, l);  // the gradients
    const int group = l.dp * l.cp;
    if (l.zero == 0) {
      v.push_back({"DP", "all_reduce", group, g, 1});
    } else {
      v.push_back({"DP", "reduce_scatter", group, g, l.zero >= 2 ? mb : 1});
      v.push_back({"DP", "all_gather", group, g, l.zero >= 3 ? 2 * mb : 1});
    }
  }
  if (m.moe() && l.ep > 1)
    v.push_back({"EP", "all_to_all", l.ep, act * m.top_k, layers_here * mb * (l.recompute == Recompute::full ? 6 : 4)});
  return v;
}

double comm_term_seconds(const CommTerm& t, const Hardware& hw) {
  if (t.op == "send") return t.count * (hw.launch + hw.alpha + t.bytes / hw.bytes_per_s);
  // An AllToAll has no ring: each member sends every other its block directly (pairwise).
  const Algorithm algorithm = t.op == "all_to_all" ? Algorithm::pairwise : Algorithm::ring;
  return t.count * collective_seconds(t.op, algorithm, t.group, t.bytes, hw);
}

double comm_term_bytes_sent(const CommTerm& t, std::size_t element_bytes, int member) {
  if (t.op == "send") return t.count * t.bytes;
  const double input = t.op == "all_gather" ? t.bytes / t.group : t.bytes;  // all_gather takes one block
  return t.count * double(predicted_bytes_sent_by(t.op, t.group, static_cast<std::size_t>(input), element_bytes, member));
}

double tp_seconds(const ModelSpec& m, const Layout& l, const Hardware& link) {
  double s = 0;
  for (const CommTerm& t : comm_terms(m, l, -1, 2, true))
    if (t.part == "TP") s += comm_term_seconds(t, link);
  return s;
}

JobCost job_cost(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const JobPlanOptions& o) {
  JobCost j;
  j.layout = l;
  j.peak = c.peak(o.dtype);
  const int devices = l.devices();
  j.micro_batches = micro_batches(m, l);
  const int mb = j.micro_batches;
  const double layers_here = double(m.layers) / l.pp;
  const double pd = device_params(m, l);
  j.params_per_device = pd;
  const double d = double(l.dp) * l.cp;  // ZeRO's sharding group
  j.memory.params = 2 * pd / (l.zero >= 3 ? d : 1);
  j.memory.grads = 2 * pd / (l.zero >= 2 ? d : 1);
  j.memory.optimizer = (o.master_weights ? 12 : 8) * pd / (l.zero >= 1 ? d : 1);
  // Activations: the stash of the first stage, plus one layer's working set under full recomputation.
  const PipeSchedule sched = l.vp > 1 ? PipeSchedule::interleaved : PipeSchedule::one_f_one_b;
  j.memory.stash = stash_formula(sched, l.pp, mb, 0, l.vp);
  const double stash_layers = double(j.memory.stash) * m.layers / (l.pp * l.vp);
  const double none = activation_bytes_per_layer(m, l.micro_batch, l, Recompute::none);
  j.memory.activations_none = stash_layers * none;
  j.memory.activations = stash_layers * activation_bytes_per_layer(m, l.micro_batch, l, l.recompute);
  if (l.recompute == Recompute::full) j.memory.activations += none;
  j.fits = j.memory.total() <= c.memory_bytes;

  // Compute: GEMMs at the measured efficiency, memory-bound kernels at HBM bandwidth.
  j.model_flops = step_flops(m, Recompute::none);
  j.hardware_flops = step_flops(m, l.recompute);
  const double passes = l.recompute == Recompute::full ? 8 : 6;  // 2 x (forward 1 + backward 2 + recompute 1)
  const double hbm = passes * layers_here * mb * none / c.hbm_bytes_per_s;
  j.time.compute = stage_flops(m, l) / (j.peak * c.gemm_efficiency) + hbm;
  // Communication: an interior stage's terms (it sends both ways) in bf16, each on the link its
  // group spans (ranks: TP, then CP, then DP, then PP).
  for (const CommTerm& t : comm_terms(m, l, -1, 2, o.scatter_gather)) {
    const int node = c.devices_per_node, tc = l.tp * l.cp;
    const bool inside = t.part == "TP"    ? tp_inside_node(c, l)
                        : t.part == "CP"  ? tc <= node
                        : t.part == "P2P" ? tc * l.dp * 2 <= node
                        : t.part == "DP"  ? tc * l.dp <= node
                                          : tc * l.ep <= node;
    const double s = comm_term_seconds(t, link_for(c, inside));
    (t.part == "TP"    ? j.time.tp
     : t.part == "CP"  ? j.time.cp
     : t.part == "P2P" ? j.time.p2p
     : t.part == "DP"  ? j.time.dp
                       : j.time.ep) += s;
  }
  j.time.dp_exposed = o.overlap_dp ? 0 : j.time.dp;
  // Of c blocks of attention a layer, c-1 run while a pass is in flight.
  const double hiding = attention_core_flops(m, l) * (l.cp - 1) / l.cp / (j.peak * c.gemm_efficiency);
  j.time.cp_exposed = std::max(0.0, j.time.cp - hiding);
  const double ideal = j.time.compute + j.time.tp + j.time.cp_exposed + j.time.ep;
  if (l.pp > 1) {
    const double f = bubble_formula(l.pp, mb, l.vp);  // share of the whole: (p-1)/(v m + p-1)
    j.time.bubble = ideal * f / (1 - f);
  }
  j.time.optimizer = 28 * pd / (l.zero >= 1 ? d : 1) / c.hbm_bytes_per_s;
  const double step = j.time.step();
  j.tokens_per_s = m.global_batch * m.seq / step;
  j.achieved_flops = j.hardware_flops / (step * devices);
  return j;
}

}  // namespace shardlab
