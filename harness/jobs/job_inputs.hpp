// The two inputs of whole-job planning: a model (a decoder-only transformer, dense or mixture of
// experts) and a cluster (nodes of devices, the links inside and between nodes, memory, peak
// FLOP/s and the fraction of peak a large GEMM reaches in practice). Both come from a preset or a
// TOML file of the same fields (model_toml / cluster_toml print one); each carries its source.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "harness/cost/cost.hpp"

namespace shardlab {

struct ModelSpec {
  std::string name, source;
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0;  // kv_heads < heads: grouped-query attention
  int ffn = 0;                 // FFN inner width (per expert for MoE)
  int vocab = 0, seq = 0;      // vocabulary (as padded for training), sequence length
  double global_batch = 0;     // sequences per optimizer step
  int experts = 0, top_k = 0;  // 0: dense
  bool gated_ffn = false;      // SwiGLU: three FFN matrices instead of two
  bool biases = true;          // GPT-2/3 style linear biases and LayerNorm (weight + bias)
  bool tied_embeddings = true; // the output layer reuses the input embedding
  bool learned_positions = true;  // a [seq, hidden] position table (GPT); false: rotary
  // Attention scores held in memory (materialized, as Megatron-LM in 2021) or never stored
  // (flash, FlashAttention's fused kernel): decides the 5 a s / h term of the activations.
  bool flash_attention = true;
  // false: a bare stack of MLP blocks, no attention and no norms (the miniature run's model,
  // harness/models/three_d.hpp); its layers hold the two FFN matrices alone.
  bool attention = true;
  bool moe() const { return experts > 0; }
};

// A link class as the cost model prices it (harness/cost/cost.hpp): alpha per message, launch
// per call, one-way bandwidth per device.
struct ClusterSpec {
  std::string name, description, source;
  int devices_per_node = 8;
  int max_nodes = 0;                        // 0: as many as asked
  double memory_bytes = 0;                  // per device
  double hbm_bytes_per_s = 0;               // device memory bandwidth (memory-bound kernels)
  std::map<std::string, double> peak_flops; // per device, by element type: "bf16", "fp8", ...
  double gemm_efficiency = 0;               // measured achievable fraction of peak for a large GEMM
  std::string efficiency_source;
  Hardware intra, inter;                    // within a node, and between nodes (per device)
  double peak(const std::string& dtype) const;  // Error(parse) naming the known types
};

// Parameters of the whole model. For the GPT block (f = 4h, biases, learned positions, tied
// embeddings) this is Narayanan et al. 2021, Section 5.1: 12 L h^2 (1 + 13/(12h) + (V+s)/(12 L h)).
double model_params(const ModelSpec& m);
double layer_params(const ModelSpec& m);         // one layer, every expert
double layer_active_params(const ModelSpec& m);  // one layer as a token sees it (top_k experts)
double expert_params(const ModelSpec& m);        // one layer's experts (0 for a dense model)
double embedding_params(const ModelSpec& m);     // input embedding, positions, untied output

const std::vector<ModelSpec>& model_presets();
const std::vector<ClusterSpec>& cluster_presets();
// A preset's name, or a path ending in .toml. Error(parse) naming the presets otherwise, Error(io)
// for a file that cannot be read.
ModelSpec load_model(const std::string& name_or_file);
ClusterSpec load_cluster(const std::string& name_or_file);
ModelSpec parse_model_toml(const std::string& text, const std::string& where);
ClusterSpec parse_cluster_toml(const std::string& text, const std::string& where);
std::string model_toml(const ModelSpec& m);
std::string cluster_toml(const ClusterSpec& c);

}  // namespace shardlab
