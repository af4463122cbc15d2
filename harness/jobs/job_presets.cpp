// The shipped models and clusters, each with its source. Data, kept in the binary so the command
// needs no path to find it; `shardlab plan-model --print-model NAME` prints one as a TOML file.
#include "harness/jobs/job_inputs.hpp"

namespace shardlab {

namespace {

#define NARAYANAN "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using " \
                  "Megatron-LM (SC21), Table 1: heads, hidden, layers and batch; vocabulary 51,200 and "      \
                  "sequence 2,048 for every row (Section 5.1)"

ModelSpec gpt(const std::string& name, const std::string& source, int layers, int hidden, int heads, double batch,
              bool flash) {
  ModelSpec m;
  m.name = name, m.source = source, m.layers = layers, m.hidden = hidden, m.heads = heads, m.kv_heads = heads;
  m.ffn = 4 * hidden, m.vocab = 51200, m.seq = 2048, m.global_batch = batch, m.flash_attention = flash;
  return m;
}

ModelSpec llama(const std::string& name, int layers, int hidden, int ffn, int heads, double batch,
                const std::string& batch_note) {
  ModelSpec m;
  m.name = name;
  m.source = "Llama Team, The Llama 3 Herd of Models (2024), Table 3: layers, model and FFN dimension, heads, "
             "8 KV heads, vocabulary 128K (128,256 entries in the released tokenizer); SwiGLU, RMSNorm, RoPE, no "
             "biases, untied output; sequence 8,192 (Section 3.4.1). " + batch_note;
  m.layers = layers, m.hidden = hidden, m.ffn = ffn, m.heads = heads, m.kv_heads = 8, m.vocab = 128256;
  m.seq = 8192, m.global_batch = batch, m.gated_ffn = true, m.biases = false, m.tied_embeddings = false;
  m.learned_positions = false;
  return m;
}

}  // namespace

const std::vector<ModelSpec>& model_presets() {
  static const std::vector<ModelSpec> presets = [] {
    std::vector<ModelSpec> v;
    v.push_back(gpt("gpt3-175b",
                    "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1: 96 layers, d_model "
                    "12,288, 96 heads, context 2,048, batch 3.2M tokens (1,536 sequences of 2,048 here); "
                    "vocabulary 50,257 padded to 51,200 as Megatron-LM pads it",
                    96, 12288, 96, 1536, true));
    // Narayanan et al. 2021 Table 1, weak scaling: (name, layers, hidden, heads, batch).
    const struct { const char* name; int layers, hidden, heads; double batch; } rows[] = {
        {"megatron-1.7b", 24, 2304, 24, 512},    {"megatron-3.6b", 30, 3072, 32, 512},
        {"megatron-7.5b", 36, 4096, 32, 512},    {"megatron-18b", 40, 6144, 48, 1024},
        {"megatron-39b", 48, 8192, 64, 1536},    {"megatron-76b", 60, 10240, 80, 1792},
        {"megatron-146b", 80, 12288, 96, 2304},  {"megatron-310b", 96, 16384, 128, 2160},
        {"megatron-530b", 105, 20480, 128, 2520}, {"megatron-1t", 128, 25600, 160, 3072},
    };
    // Megatron-LM in 2021 stored the attention scores (no fused flash attention).
    for (const auto& r : rows) v.push_back(gpt(r.name, NARAYANAN, r.layers, r.hidden, r.heads, r.batch, false));
    const std::string assumed = "Batch not published for this size: 2,048 sequences (16M tokens) assumed, the "
                                "405B model's final batch (Section 3.4.1).";
    v.push_back(llama("llama3-8b", 32, 4096, 14336, 32, 2048, assumed));
    v.push_back(llama("llama3-70b", 80, 8192, 28672, 64, 2048, assumed));
    v.push_back(llama("llama3-405b", 126, 16384, 53248, 128, 2048,
                      "Batch 16M tokens, 2,048 sequences of 8,192, the final stage of Section 3.4.1."));
    // Long-context training, where context parallelism pays.
    ModelSpec long_context = llama("llama3-70b-128k", 80, 8192, 28672, 64, 128,
                                   "Long-context stage (Section 3.4.2): sequences grown to 131,072 tokens; batch "
                                   "16M tokens assumed (128 sequences), as Table 4's 131,072-token row of the "
                                   "405B model, which ran with context parallelism 16.");
    long_context.seq = 131072;
    v.push_back(long_context);
    ModelSpec mix = llama("mixtral-8x7b", 32, 4096, 14336, 32, 1024, "");
    mix.source = "Jiang et al. 2024, Mixtral of Experts, Table 1: dim 4,096, 32 layers, head_dim 128, hidden_dim "
                 "14,336, 32 heads, 8 KV heads, vocabulary 32,000, 8 experts, top 2; SwiGLU, RMSNorm, RoPE, untied. "
                 "Training sequence and batch not published: 4,096 and 1,024 sequences (4M tokens) assumed.";
    mix.vocab = 32000, mix.seq = 4096, mix.experts = 8, mix.top_k = 2;
    v.push_back(mix);
    return v;
  }();
  return presets;
}

namespace {

#define NCCL_LATENCY "Alpha and launch: NCCL's cost model (src/graph/tuning.cc: Ring/LL base latency 6.6 us a " \
                     "call; 0.6 us a step over NVLink, 2.7 us over the network), as harness/cost/cost.cpp's presets."
#define GEMM_A100 "A half-precision matmul as a framework issues it, A100 80GB: 230 of 312 TFLOP/s (73.7%) " \
                  "(M. Li, transformers-benchmarks, micro-benchmark summary, PyTorch matmul). The best shape " \
                  "found by a search reaches 267.9 (85.9%) with CUDA 12.1 (S. Bekman, ml-engineering, MAMF " \
                  "table): a ceiling that training's fixed shapes do not reach"

ClusterSpec cluster(const std::string& name, const std::string& description, const std::string& source) {
  ClusterSpec c;
  c.name = name, c.description = description, c.source = source;
  return c;
}

Hardware link(const std::string& name, double alpha_us, double launch_us, double gb_per_s) {
  Hardware hw;
  hw.name = name, hw.alpha = alpha_us * 1e-6, hw.launch = launch_us * 1e-6, hw.bytes_per_s = gb_per_s * 1e9;
  hw.reduce_bytes_per_s = hw.bytes_per_s * 10, hw.element_bytes = 2;
  return hw;
}

}  // namespace

const std::vector<ClusterSpec>& cluster_presets() {
  static const std::vector<ClusterSpec> presets = [] {
    std::vector<ClusterSpec> v;
    ClusterSpec a = cluster("dgx-a100", "DGX A100 80GB nodes: 8 A100 on NVSwitch, 8 x 200 Gb/s InfiniBand",
                            "NVIDIA DGX A100 datasheet and A100 datasheet: 8 GPUs a node, NVLink 3 600 GB/s per GPU "
                            "(300 GB/s each way), 8 ConnectX-6 200 Gb/s HDR ports (25 GB/s a GPU each way), 80 GB "
                            "HBM2e at 2,039 GB/s; 312 TFLOP/s dense bf16/fp16, 156 tf32, 19.5 fp32 (the Selene "
                            "nodes of Narayanan et al. 2021, Section 5). Inside a node the link is priced at the bus "
                            "bandwidth NCCL's all_reduce_perf measures on 8 A100-SXM4-80GB over NVLink, 200 GB/s "
                            "(nccl-tests issues 149 and 178: 200 and 208), not the 300 GB/s of the datasheet; HBM at "
                            "90% of its 2,039 GB/s, the efficiency of large transfers in Calculon's A100 description "
                            "(Isaev et al. 2023, systems/a100_80g.json). "
                            NCCL_LATENCY);
    a.devices_per_node = 8, a.memory_bytes = 80e9, a.hbm_bytes_per_s = 0.9 * 2039e9;
    a.peak_flops = {{"bf16", 312e12}, {"fp16", 312e12}, {"tf32", 156e12}, {"fp32", 19.5e12}};
    a.gemm_efficiency = 230.0 / 312, a.efficiency_source = GEMM_A100;
    a.intra = link("dgx-a100 intra", 0.6, 6.6, 200), a.inter = link("dgx-a100 inter", 2.7, 6.6, 25);
    v.push_back(a);
    ClusterSpec h = cluster("dgx-h100", "DGX H100 nodes: 8 H100 SXM on NVSwitch, 8 x 400 Gb/s InfiniBand",
                            "NVIDIA DGX H100 datasheet and H100 datasheet: 8 GPUs a node, NVLink 4 900 GB/s per GPU "
                            "(450 GB/s each way), 8 ConnectX-7 400 Gb/s NDR ports (50 GB/s a GPU each way), 80 GB "
                            "HBM3 at 3,350 GB/s; 989 TFLOP/s dense bf16/fp16, 1,979 fp8, 495 tf32, 67 fp32. "
                            NCCL_LATENCY);
    h.devices_per_node = 8, h.memory_bytes = 80e9, h.hbm_bytes_per_s = 3350e9;
    h.peak_flops = {{"bf16", 989e12}, {"fp16", 989e12}, {"fp8", 1979e12}, {"tf32", 495e12}, {"fp32", 67e12}};
    h.gemm_efficiency = 0.801;
    h.efficiency_source = "Maximum achievable matmul FLOPS, H100 SXM bf16: 792.1 of 989 TFLOP/s (80.1%), CUDA 12.1 "
                          "(S. Bekman, ml-engineering, compute/accelerator/README.md, MAMF comparison table)";
    h.intra = link("dgx-h100 intra", 0.6, 6.6, 450), h.inter = link("dgx-h100 inter", 2.7, 6.6, 50);
    v.push_back(h);
    ClusterSpec t = cluster("tpu-v4", "TPU v4 slice: 4x4x4 cubes of chips on a 3D ICI torus, cubes joined by "
                                      "optical switches",
                            "Jouppi et al. 2023, TPU v4: An Optically Reconfigurable Supercomputer (ISCA), and the "
                            "JAX scaling book, part 2: 275 TFLOP/s bf16 a chip, 32 GiB HBM at 1,200 GB/s, 6 ICI links "
                            "of ~45 GB/s each way; a collective along one torus axis drives 2 links (90 GB/s), the "
                            "same across the optical switches between cubes. Alpha ~1 us a hop, no launch: XLA "
                            "compiles the collectives into the step (harness/cost/cost.cpp).");
    t.devices_per_node = 64, t.memory_bytes = 34.36e9, t.hbm_bytes_per_s = 1200e9;
    t.peak_flops = {{"bf16", 275e12}, {"int8", 275e12}};
    t.gemm_efficiency = 0.8;
    t.efficiency_source = "No published maximum-achievable matmul rate for TPU v4 was found: 0.8 assumed, the H100's "
                          "measured 80.1% (ml-engineering MAMF table); replace it with a measurement";
    t.intra = link("tpu-v4 intra", 1, 0, 90), t.inter = link("tpu-v4 inter", 1, 0, 90);
    v.push_back(t);
    return v;
  }();
  return presets;
}

#undef NARAYANAN
#undef NCCL_LATENCY
#undef GEMM_A100

}  // namespace shardlab
