// The whole-job cost model (harness/jobs/plan_model.hpp) against published figures: the parameter
// counts and throughput of Narayanan et al. 2021's Table 1, the ZeRO paper's memory per device,
// Korthikanti et al. 2022's activations and Narayanan's FLOPs formula.
#include <doctest/doctest.h>

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
    JobSearchOptions o;
    o.devices = 1024;
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
