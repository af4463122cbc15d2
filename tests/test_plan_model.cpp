// The whole-job cost model (harness/jobs/plan_model.hpp) against published figures: the parameter
// counts and throughput of Narayanan et al. 2021's Table 1, the ZeRO paper's memory per device,
// Korthikanti et al. 2022's activations, Narayanan's FLOPs formula, the JAX scaling book's worked
// memory figures, and context parallelism's terms by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "harness/jobs/job_search.hpp"

using namespace shardlab;

namespace {

// Narayanan et al. 2021 (SC21), Table 1, weak scaling on Selene (DGX A100 80GB): the configuration
// (t, p, GPUs) and the achieved teraFLOP/s per GPU, which counts the FLOPs of full recomputation.
// The micro-batch, the layers per virtual stage and the data-parallel implementation are not in
// the table: they are the paper's own scripts, Megatron-LM examples/sc21/run_table_1.sh (MBS,
// --num-layers-per-virtual-pipeline-stage, DDP=torch, whose all-reduce overlaps the backward, or
// DDP=local, which reduces after it).
struct Row {
  const char* model;
  double params_b;
  int t, p, gpus;
  double tflops;
  int micro_batch, virtual_stages;
  bool torch_ddp;
};
const Row table1[] = {
    {"megatron-1.7b", 1.7, 1, 1, 32, 137, 16, 1, true},       {"megatron-3.6b", 3.6, 2, 1, 64, 138, 16, 1, true},
    {"megatron-7.5b", 7.5, 4, 1, 128, 142, 16, 1, true},      {"megatron-18b", 18.4, 8, 1, 256, 135, 8, 1, true},
    {"megatron-39b", 39.1, 8, 2, 512, 138, 4, 1, false},      {"megatron-76b", 76.1, 8, 4, 1024, 140, 2, 3, false},
    {"megatron-146b", 145.6, 8, 8, 1536, 148, 2, 2, false},   {"megatron-310b", 310.1, 8, 16, 1920, 155, 1, 2, false},
    {"megatron-530b", 529.6, 8, 35, 2520, 163, 1, 3, false},  {"megatron-1t", 1008.0, 8, 64, 3072, 163, 1, 1, false},
};

// Ours for a row: its stated layout with full recomputation and no ZeRO or SP (Megatron-LM in
// 2021), on the dgx-a100 preset.
JobCost predicted(const Row& r) {
  const ModelSpec m = load_model(r.model);
  const ClusterSpec c = load_cluster("dgx-a100");
  Layout l;
  l.tp = r.t, l.pp = r.p, l.dp = r.gpus / (r.t * r.p), l.micro_batch = r.micro_batch, l.vp = r.virtual_stages;
  l.recompute = Recompute::full;
  REQUIRE(layout_problem(m, c, r.gpus, l) == "");
  JobPlanOptions o;
  o.overlap_dp = r.torch_ddp;
  const JobCost j = job_cost(m, c, l, o);
  REQUIRE(j.fits);
  return j;
}

JobSearchOptions on(int devices) {
  JobSearchOptions o;
  o.devices = devices;
  return o;
}

}  // namespace

TEST_SUITE("plan-model") {
  TEST_CASE("parameters: Narayanan et al. 2021 Table 1's column, 1.7B to 1T") {
    for (const Row& r : table1) {
      const std::string name = r.model;
      CAPTURE(name);
      // The table prints one decimal: ours must round to it.
      CHECK(std::abs(model_params(load_model(r.model)) / 1e9 - r.params_b) <= 0.05);
    }
    CHECK(model_params(load_model("gpt3-175b")) / 1e9 == doctest::Approx(174.6).epsilon(0.001));
  }

  TEST_CASE("FLOPs a step: Narayanan's 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) with full recomputation") {
    const ModelSpec m = load_model("megatron-1t");
    const double B = m.global_batch, s = m.seq, L = m.layers, h = m.hidden, V = m.vocab;
    const double paper = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
    CHECK(step_flops(m, Recompute::full) == doctest::Approx(paper).epsilon(1e-12));
    CHECK(step_flops(m, Recompute::none) == doctest::Approx(72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))));
  }

  TEST_CASE("activations: Korthikanti et al. 2022 Table 2, per layer") {
    const ModelSpec m = load_model("megatron-530b");  // materialized attention scores
    const double s = m.seq, h = m.hidden, a = m.heads, t = 8;
    Layout l;
    CHECK(activation_bytes_per_layer(m, 1, l, Recompute::none) == doctest::Approx(s * h * (34 + 5 * a * s / h)));
    l.tp = 8;
    CHECK(activation_bytes_per_layer(m, 1, l, Recompute::none) ==
          doctest::Approx(s * h * (10 + 24 / t + 5 * a * s / (h * t))));
    l.sp = true;
    CHECK(activation_bytes_per_layer(m, 1, l, Recompute::none) == doctest::Approx(s * h * (34 + 5 * a * s / h) / t));
    CHECK(activation_bytes_per_layer(m, 1, l, Recompute::selective) == doctest::Approx(s * h * 34 / t));
    CHECK(activation_bytes_per_layer(m, 1, l, Recompute::full) == doctest::Approx(2 * s * h / t));
  }

  TEST_CASE("memory: the ZeRO paper's 7.5B parameters on 64 GPUs, 120 -> 31.4 -> 16.6 -> 1.9 GB") {
    // Rajbhandari et al. 2020, Figure 1 (Psi = 7.5B, K = 12, Nd = 64).
    const ModelSpec m = load_model("megatron-7.5b");
    const ClusterSpec c = load_cluster("dgx-a100");
    const double published[] = {120, 31.4, 16.6, 1.9};
    for (int zero = 0; zero <= 3; ++zero) {
      Layout l;
      l.dp = 64, l.zero = zero;
      const JobCost j = job_cost(m, c, l);
      CAPTURE(zero);
      CHECK((j.memory.params + j.memory.grads + j.memory.optimizer) / 1e9 ==
            doctest::Approx(published[zero]).epsilon(0.03));
    }
  }

  TEST_CASE("throughput: Narayanan et al. 2021 Table 1, achieved teraFLOP/s per GPU, within 10%") {
    // Every row is still predicted high (+1% to +10%): a term is still missing (docs/plan-model.md).
    for (const Row& r : table1) {
      const JobCost j = predicted(r);
      const double err = j.achieved_flops / 1e12 / r.tflops - 1;
      const std::string name = r.model;
      CAPTURE(name);
      CAPTURE(err);
      CHECK(std::abs(err) <= 0.10);
    }
  }

  TEST_CASE("search: GPT-3 175B on 1024 A100s fits, keeps TP in a node, and is quick") {
    const JobSearchOptions o = on(1024);
    const ModelSpec m = load_model("gpt3-175b");
    const ClusterSpec c = load_cluster("dgx-a100");
    const JobSearchResult r = search_layouts(m, c, o);
    REQUIRE(!r.fitting.empty());
    const JobCost& best = r.fitting[0];
    CHECK(best.memory.total() <= c.memory_bytes);
    CHECK(best.layout.tp <= 8);
    CHECK(best.layout.devices() == 1024);
    CHECK(best.mfu() > 0.3);
    CHECK(best.mfu() < 1);
    for (const auto& line : {plan_text(m, c, o, r, 3)})
      for (std::size_t at = 0, next; at < line.size(); at = next + 1) {
        next = line.find('\n', at);
        if (next == std::string::npos) next = line.size();
        CHECK(next - at <= 100);
      }
  }

  TEST_CASE("CP: activations over c, ring attention's K/V passes and their overlap, by hand") {
    // Megatron 530B (GPT block, stored scores) on DGX A100, DP 4 x TP 2+SP x CP 4 x PP 35, ZeRO-1,
    // b 1: every term written from the ring-attention algorithm (Liu et al. 2023), not the code.
    const ModelSpec m = load_model("megatron-530b");
    const ClusterSpec c = load_cluster("dgx-a100");
    Layout l;
    l.dp = 4, l.tp = 2, l.sp = true, l.cp = 4, l.pp = 35, l.zero = 1;
    REQUIRE(layout_problem(m, c, 4 * 2 * 4 * 35, l) == "");
    const double s = m.seq, h = m.hidden, a = m.heads, t = 2, cp = 4, L = m.layers, p = 35;
    // Korthikanti's TP+SP activations of a layer, each device holding s / c tokens of a sequence
    // (its queries' scores against all s keys: 5 a s (s / c) b bytes).
    CHECK(activation_bytes_per_layer(m, 1, l, Recompute::none) ==
          doctest::Approx(s / cp * h * (34 + 5 * a * s / h) / t));
    const JobCost j = job_cost(m, c, l);
    // ZeRO-1 shards the optimizer over DP x CP, 16 replicas of the weights.
    CHECK(j.memory.optimizer == doctest::Approx(12 * j.params_per_device / 16));
    // K and V of s / c tokens, h / t wide on a TP rank, bf16: 4 s h / (c t) bytes a pass; c - 1
    // passes forward and 2 (c - 1) backward, a layer and a micro-batch, on NVLink (t c = 8).
    const double mb = m.global_batch / 4, pass_bytes = 4 * s * h / (cp * t);
    const double passes = L / p * mb * 3 * (cp - 1);
    const double pass_s = c.intra.launch + c.intra.alpha + pass_bytes / c.intra.bytes_per_s;
    CHECK(j.time.cp == doctest::Approx(passes * pass_s));
    // Hidden behind c - 1 of c blocks of the attention core: 4 (s/c) s h / t FLOPs a sequence,
    // forward 1 + backward 2.
    const double core = L / p * mb * 3 * 4 * (s / cp) * s * h / t;
    const double hidden = core * (cp - 1) / cp / (c.peak("bf16") * c.gemm_efficiency);
    CHECK(j.time.cp_exposed == doctest::Approx(std::max(0.0, passes * pass_s - hidden)));
    CHECK(j.time.cp_exposed < j.time.cp);
    // The sequence must split into 2 c blocks, and a model without attention has no CP.
    l.cp = 3;
    CHECK(layout_problem(m, c, 4 * 2 * 3 * 35, l) != "");
  }

  TEST_CASE("CP: a win under kCpTie is a tie, and the layout without CP goes first") {
    // GPT-3 175B at 2,048 tokens on 1024 A100s: the fastest layout with CP beats the fastest
    // without by about 1%, inside the model's own error; practice (Megatron-LM) runs no CP there.
    const ModelSpec m = load_model("gpt3-175b");
    const ClusterSpec c = load_cluster("dgx-a100");
    const JobSearchOptions o = on(1024);
    const JobSearchResult r = search_layouts(m, c, o);
    REQUIRE(!r.fitting.empty());
    CHECK(r.fitting[0].layout.cp == 1);
    const auto with_cp = std::find_if(r.fitting.begin(), r.fitting.end(), [](const JobCost& j) { return j.layout.cp > 1; });
    REQUIRE(with_cp != r.fitting.end());
    CHECK(with_cp->time.step() < r.fitting[0].time.step());  // faster by the model, yet a tie
    CHECK(with_cp->time.step() >= r.fitting[0].time.step() / (1 + kCpTie));
    CHECK(plan_text(m, c, o, r, 3).find("(within 3%: a tie,") != std::string::npos);
    // Left alone when the front has no CP, and when CP wins by more than the tie.
    std::vector<JobCost> order = {r.fitting[0], *with_cp};
    prefer_no_cp_on_a_tie(order);
    CHECK(order[0].layout.cp == 1);
    std::vector<JobCost> cp_first = {*with_cp, r.fitting[0]};
    prefer_no_cp_on_a_tie(cp_first);
    CHECK(cp_first[0].layout.cp == 1);
    cp_first = {*with_cp};
    prefer_no_cp_on_a_tie(cp_first);
    CHECK(cp_first[0].layout.cp > 1);
  }

  TEST_CASE("CP: the search picks it for 128K-token sequences and not for 8K ones") {
    // Llama 3 8B on 256 H100s, 16M tokens a step either way. At 8,192 tokens (2,048 sequences) DP
    // has sequences to spare and needs no pipeline; at 131,072 tokens the batch is 128 sequences,
    // and without CP the devices left over go to TP across nodes or a pipeline's bubble. Llama 3's
    // own 131,072-token runs used CP 16 (Llama Team 2024, Table 4).
    const ClusterSpec c = load_cluster("dgx-h100");
    const JobSearchOptions o = on(256);
    const ModelSpec short_seq = load_model("llama3-8b");
    const JobSearchResult rs = search_layouts(short_seq, c, o);
    REQUIRE(!rs.fitting.empty());
    CHECK(rs.fitting[0].layout.cp == 1);
    ModelSpec long_seq = short_seq;
    long_seq.seq = 131072, long_seq.global_batch = 128;
    const JobSearchResult rl = search_layouts(long_seq, c, o);
    REQUIRE(!rl.fitting.empty());
    const JobCost& best = rl.fitting[0];
    CHECK(best.layout.cp > 1);
    CHECK(best.fits);
    const std::string text = plan_text(long_seq, c, o, rl, 3);
    CHECK(text.find("CP " + std::to_string(best.layout.cp) + " chosen") != std::string::npos);
  }

  TEST_CASE("the JAX scaling book's training figures: LLaMA 3 70B and LLaMA 2 13B") {
    // Austin et al. 2025, How to Scale Your Model (the JAX scaling book), part 6 "Training LLaMA 3
    // on TPUs" (applied-training) and part 5 "How to Parallelize a Transformer for Training"
    // (training, its worked problems). The book counts bf16 weights and Adam's two fp32 moments,
    // 2 + 8 bytes a parameter: no fp32 master copy, no gradients.
    JobPlanOptions book;
    book.master_weights = false;
    const ClusterSpec c = load_cluster("dgx-h100");
    {
      // Part 6: 70.4e9 parameters (vocabulary 2.1e9 of them); weights ~140 GB, optimizer state
      // ~560 GB; three bf16 checkpoints of [tokens, d_model] a layer over a 4M-token batch ~15.8 TB.
      const ModelSpec m = load_model("llama3-70b");
      CHECK(model_params(m) / 1e9 == doctest::Approx(70.4).epsilon(0.005));
      CHECK(embedding_params(m) / 1e9 == doctest::Approx(2.1).epsilon(0.005));
      const JobCost j = job_cost(m, c, Layout{}, book);  // one device holds it all
      CHECK(j.memory.params / 1e9 == doctest::Approx(2 * 70.4).epsilon(0.005));
      CHECK(j.memory.optimizer / 1e9 == doctest::Approx(8 * 70.4).epsilon(0.005));
      // Our full recomputation keeps one such checkpoint a layer, the layer's input.
      const double sequences = 4e6 / m.seq;
      const double checkpoints = 3 * activation_bytes_per_layer(m, 1, Layout{}, Recompute::full) * m.layers * sequences;
      CHECK(checkpoints / 1e12 == doctest::Approx(15.8).epsilon(0.01));
    }
    {
      // Part 5, problems 1-2: LLaMA 2 13B has 13.1e9 parameters (FFN 8.5e9, attention 4.2e9,
      // vocabulary 0.3e9 by its terms); weights and optimizer state take ~130 GB.
      ModelSpec m = load_model("llama3-8b");
      m.name = "llama2-13b", m.layers = 40, m.hidden = 5120, m.ffn = 13824, m.heads = m.kv_heads = 40;
      m.vocab = 32000, m.seq = 4096;
      CHECK(model_params(m) / 1e9 == doctest::Approx(13.1).epsilon(0.01));
      const JobCost j = job_cost(m, c, Layout{}, book);
      CHECK((j.memory.params + j.memory.optimizer) / 1e9 == doctest::Approx(130).epsilon(0.01));
    }
  }

  TEST_CASE("EP: Mixtral 8x7B's search prices expert parallelism's AllToAlls (pairwise, no ring)") {
    const ModelSpec m = load_model("mixtral-8x7b");
    const JobSearchOptions o = on(64);
    const JobSearchResult r = search_layouts(m, load_cluster("dgx-h100"), o);
    REQUIRE(!r.fitting.empty());
    bool ep_priced = false;
    for (const auto& j : r.fitting) ep_priced = ep_priced || (j.layout.ep > 1 && j.time.ep > 0);
    CHECK(ep_priced);
    CHECK(plan_text(m, load_cluster("dgx-h100"), o, r, 3).find("EP only for experts (8 here, top 2)") != std::string::npos);
  }

  TEST_CASE("bad input: unknown presets and device counts that are not whole nodes") {
    CHECK_THROWS_WITH_AS(load_model("gpt-9"), doctest::Contains("unknown model gpt-9"), Error);
    CHECK_THROWS_AS(load_cluster("dgx-z"), Error);
    JobSearchOptions o;
    o.devices = 12;
    CHECK_THROWS_AS(search_layouts(load_model("gpt3-175b"), load_cluster("dgx-a100"), o), Error);
  }

  TEST_CASE("TOML: a preset printed as a file reads back the same") {
    const ModelSpec m = load_model("mixtral-8x7b");
    const ModelSpec back = parse_model_toml(model_toml(m), "mixtral.toml");
    CHECK(model_params(back) == model_params(m));
    CHECK(back.source == m.source);
    const ClusterSpec c = load_cluster("dgx-h100");
    const ClusterSpec cb = parse_cluster_toml(cluster_toml(c), "h100.toml");
    CHECK(cb.peak("bf16") == c.peak("bf16"));
    CHECK(cb.inter.bytes_per_s == c.inter.bytes_per_s);
    CHECK(cb.gemm_efficiency == c.gemm_efficiency);
  }
}
