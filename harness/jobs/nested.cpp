// Article 002's nested mesh as one model (harness/jobs/nested.hpp): the devices' program, the
// unsharded reference, the bytes each part moves by formula, and the checks.
#include "harness/jobs/nested.hpp"

#include <algorithm>
#include <cmath>

#include "collectives/collectives.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/table.hpp"
#include "core/text.hpp"
#include "harness/models/moe_expert.hpp"

namespace shardlab {

namespace {

// The run's sizes: S stages (the X axis) and as many micro-batches, n expert (and vocabulary)
// devices on Y, r tokens per device and micro-batch, bx = n r tokens per batch block.
struct Dims {
  int S = 1, n = 1, per_stage = 1;
  std::size_t r = 1, bx = 1, C = 1, vn = 1;  // vn: vocabulary rows per device
};

Dims dims_of(const NestedShape& s, const Mesh& mesh) {
  Dims d;
  d.S = mesh.axis_size("X");
  d.n = mesh.axis_size("Y");
  d.per_stage = s.layers / d.S;
  d.bx = s.batch / static_cast<std::size_t>(d.S);
  d.r = d.bx / static_cast<std::size_t>(d.n);
  d.vn = s.vocab / static_cast<std::size_t>(d.n);
  d.C = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(s.capacity_factor * s.top_k * double(d.r) / s.experts - 1e-9)));
  return d;
}

void round_all(Tensor& v, DType t) {
  for (auto& a : v) a = round_to(t, a);
}

// logits [rows, cols] = h [rows, m] . unembed[:, v0 : v0 + cols], each a sum in index order rounded to t.
Tensor vocab_logits(const Tensor& h, const Tensor& unembed, std::size_t v0, std::size_t cols, DType t) {
  const std::size_t rows = h.shape()[0], m = h.shape()[1];
  Tensor l = xt::zeros<double>({rows, cols});
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t v = 0; v < cols; ++v) {
      double acc = 0;
      for (std::size_t j = 0; j < m; ++j) acc += h(i, j) * unembed(j, v0 + v);
      l(i, v) = round_to(t, acc);
    }
  return l;
}

// One MoE layer on the devices of one stage: this device's group of tokens act [r, m]; experts
// over Y, E/n of them here. Returns act + the gated sum of each token's kept experts.
Tensor moe_layer(Device& dev, const Tensor& act, const NestedShape& s, const NestedInputs& in, int layer, const Dims& d) {
  const DType t = dev.dtype();
  const std::size_t E = static_cast<std::size_t>(s.experts), K = static_cast<std::size_t>(s.top_k), m = s.model;
  const std::size_t hid = s.hidden, r = act.shape()[0], El = E / static_cast<std::size_t>(d.n);
  const std::size_t e0 = El * static_cast<std::size_t>(dev.coord("Y")), slots = static_cast<std::size_t>(d.n) * d.C;
  // Pack each kept assignment into its expert's next slot, in token order.
  Tensor dispatch = xt::zeros<double>({E, d.C, m});
  std::vector<std::size_t> kept(E, 0);
  std::vector<TokenRoute> routes;
  std::vector<std::vector<long>> slot(r, std::vector<long>(K, -1));
  for (std::size_t i = 0; i < r; ++i) {
    const std::vector<double> logits = token_logits(act, in.router[layer], i, s.experts, t);
    routes.push_back(route_token(logits.data(), s.experts, s.top_k, t));
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t e = static_cast<std::size_t>(routes[i].experts[k]);
      if (kept[e] >= d.C) continue;  // dropped: the expert is full for this group
      slot[i][k] = static_cast<long>(kept[e]++);
      std::copy_n(&act(i, 0), m, &dispatch(e, static_cast<std::size_t>(slot[i][k]), 0));
    }
  }
  const Tensor xs = all_to_all(dev, dispatch, {"Y"}, 0, 1, "dispatch");  // [E/n, n C, m]: my experts' slots
  Tensor ys = xt::zeros<double>({El, slots, m});
  std::vector<double> h(hid);
  for (std::size_t el = 0; el < El; ++el)
    for (std::size_t q = 0; q < slots; ++q)
      expert_forward(in.w_in[layer], in.w_out[layer], e0 + el, &xs(el, q, 0), h.data(), &ys(el, q, 0), m, hid, t);
  const Tensor back = all_to_all(dev, ys, {"Y"}, 1, 0, "combine");  // [E, C, m] at the tokens again
  Tensor out = act;
  for (std::size_t i = 0; i < r; ++i) {
    std::vector<double> acc(m, 0.0);
    for (std::size_t k = 0; k < K; ++k) {
      if (slot[i][k] < 0) continue;
      const std::size_t e = static_cast<std::size_t>(routes[i].experts[k]), q = static_cast<std::size_t>(slot[i][k]);
      for (std::size_t j = 0; j < m; ++j) acc[j] += routes[i].gates[k] * back(e, q, j);
    }
    for (std::size_t j = 0; j < m; ++j) out(i, j) = round_to(t, act(i, j) + round_to(t, acc[j]));
  }
  return out;
}

// The softmax over a vocabulary split over Y: rows [bx, m] (whole over Y), this device's columns.
Tensor split_softmax(Device& dev, const Tensor& rows, const NestedInputs& in, const Dims& d) {
  const DType t = dev.dtype();
  const std::size_t v0 = d.vn * static_cast<std::size_t>(dev.coord("Y"));
  Tensor l = vocab_logits(rows, in.unembed, v0, d.vn, t);
  Tensor most = xt::zeros<double>({d.bx, std::size_t{1}}), sum = most;
  for (std::size_t i = 0; i < d.bx; ++i) most(i, 0) = *std::max_element(&l(i, 0), &l(i, 0) + d.vn);
  most = all_reduce_max(dev, most, {"Y"}, "row_max");
  for (std::size_t i = 0; i < d.bx; ++i)
    for (std::size_t v = 0; v < d.vn; ++v) {
      l(i, v) = round_to(t, std::exp(l(i, v) - most(i, 0)));
      sum(i, 0) += l(i, v);
    }
  round_all(sum, t);
  sum = all_reduce(dev, sum, {"Y"}, "row_sum");
  for (std::size_t i = 0; i < d.bx; ++i)
    for (std::size_t v = 0; v < d.vn; ++v) l(i, v) = round_to(t, l(i, v) / sum(i, 0));
  return l;
}

}  // namespace

NestedInputs nested_inputs(const NestedShape& s, std::uint64_t seed) {
  const std::size_t V = s.vocab, m = s.model, h = s.hidden, E = static_cast<std::size_t>(s.experts);
  NestedInputs in;
  in.tokens = random_integers({s.batch}, seed, 0, static_cast<int>(V) - 1);
  in.embed = random_integers({V, m}, seed + 1, -8, 8) / 8.0;
  in.unembed = random_integers({m, V}, seed + 2, -4, 4) / 8.0;
  for (int l = 0; l < s.layers; ++l) {
    const std::uint64_t k = seed + 10 + 3 * static_cast<std::uint64_t>(l);
    in.router.push_back(random_integers({m, E}, k, -2, 2) / 2.0);
    in.w_in.push_back(random_integers({E, m, h}, k + 1, -2, 2) / 8.0);
    in.w_out.push_back(random_integers({E, h, m}, k + 2, -2, 2) / 8.0);
  }
  return in;
}

void check_nested(const NestedShape& s, const Mesh& mesh) {
  auto fail = [](const std::string& why) { throw Error(ErrorKind::parse, why); };
  if (mesh.names() != std::vector<std::string>{"X", "Y"})
    fail("shardlab nested needs a mesh of the axes X (batch, then stages) and Y (vocabulary, then experts), "
         "e.g. --mesh X=4,Y=4, not " + mesh.text());
  const std::size_t X = static_cast<std::size_t>(mesh.axis_size("X")), Y = static_cast<std::size_t>(mesh.axis_size("Y"));
  auto range = [&](const char* flag, std::size_t v, std::size_t hi) {
    if (v < 1 || v > hi) fail(std::string(flag) + " is " + std::to_string(v) + "; give 1 to " + std::to_string(hi));
  };
  range("--batch", s.batch, 4096);
  range("--vocab", s.vocab, 4096);
  range("--model", s.model, 64);
  range("--hidden", s.hidden, 64);
  range("--experts", static_cast<std::size_t>(std::max(s.experts, 0)), 64);
  range("--layers", static_cast<std::size_t>(std::max(s.layers, 0)), 16);
  if (s.top_k < 1 || s.top_k > s.experts)
    fail("--top-k is " + std::to_string(s.top_k) + "; give 1 to --experts (" + std::to_string(s.experts) + ")");
  if (!(s.capacity_factor > 0) || s.capacity_factor > 64) fail("--capacity-factor must be above 0 and at most 64");
  auto divides = [&](const char* flag, std::size_t v, std::size_t by, const std::string& why) {
    if (v % by != 0)
      fail(std::string(flag) + " " + std::to_string(v) + " is not divisible by " + std::to_string(by) + " (" + why +
           "); give a multiple of " + std::to_string(by));
  };
  divides("--batch", s.batch, X * Y, "X x Y: a token group per device and micro-batch");
  divides("--vocab", s.vocab, Y, "the vocabulary is split over Y");
  divides("--experts", static_cast<std::size_t>(s.experts), Y, "the experts are split over Y");
  divides("--layers", static_cast<std::size_t>(s.layers), X, "one stage of layers per device of X");
  if (const double work = nested_work(s, mesh); work > kNestedLimitWork)
    throw Error(ErrorKind::unsupported, "this nested model needs about " + format_number(work, "%.2g") +
                                            " multiply-adds, more than the " + format_number(kNestedLimitWork, "%.0e") +
                                            " it may take (seconds, not minutes); give a smaller --batch, --layers, "
                                            "--top-k, --capacity-factor, --model or --hidden");
  refuse_if_over_memory(nested_run_bytes(s, mesh), "this nested model", "give a smaller --batch, --vocab, --top-k or "
                        "--capacity-factor", kNestedLimitBytes);
}

double nested_work(const NestedShape& s, const Mesh& mesh) {
  const Dims d = dims_of(s, mesh);
  const double B = double(s.batch), E = s.experts, expert = 2.0 * double(s.model) * double(s.hidden);
  const double slots = B / double(d.r) * E * double(d.C);  // every group's buffer, full or not
  return s.layers * (slots * expert + B * s.top_k * expert + 2 * B * E * double(s.model)) +
         2.0 * B * double(s.vocab) * double(s.model);
}

double nested_run_bytes(const NestedShape& s, const Mesh& mesh) {
  const Dims d = dims_of(s, mesh);
  const double E = s.experts, m = double(s.model), h = double(s.hidden);
  const double weights = s.layers * (m * E + 2 * E * m * h) + 2.0 * double(s.vocab) * m;
  const double slots = double(mesh.devices()) * 5 * E * double(d.C) * m;  // every device's AllToAll buffers
  const double probabilities = 6.0 * double(s.batch) * double(s.vocab);
  return 8.0 * (weights + slots + probabilities);
}

std::size_t nested_capacity(const NestedShape& s, const Mesh& mesh) { return dims_of(s, mesh).C; }

SpmdProgram nested_program(const NestedShape& s, const NestedInputs& in) {
  return [s, &in](Device& dev) -> Outputs {
    const Mesh& mesh = dev.mesh();
    const Dims d = dims_of(s, mesh);
    const int x = dev.coord("X"), y = dev.coord("Y");
    auto at = [&](int stage) { return mesh.device({stage, y}); };  // the device of row `stage` in my column
    const Shape group{d.r, s.model};

    // Embedding: my batch block's tokens, my vocabulary rows; the partial rows summed over Y.
    const std::size_t v0 = d.vn * static_cast<std::size_t>(y);
    Tensor partial = xt::zeros<double>({d.bx, s.model});
    for (std::size_t i = 0; i < d.bx; ++i) {
      const std::size_t tok = static_cast<std::size_t>(in.tokens(static_cast<std::size_t>(x) * d.bx + i));
      if (tok >= v0 && tok < v0 + d.vn) std::copy_n(&in.embed(tok, 0), s.model, &partial(i, 0));
    }
    const Tensor embedded = reduce_scatter(dev, partial, {"Y"}, 0, "emb_partial");  // [r, m]

    // Batch block x becomes micro-batch x, which starts at stage 0.
    if (x != 0) send(dev, embedded, at(0), "to_stages");

    // The encoder: stage x runs its layers on each micro-batch as it comes.
    std::vector<Tensor> last(static_cast<std::size_t>(d.S));
    for (int c = 0; c < d.S; ++c) {
      Tensor act = x > 0 ? recv(dev, at(x - 1), group, "act") : c == 0 ? embedded : recv(dev, at(c), group, "to_stages");
      for (int l = x * d.per_stage; l < (x + 1) * d.per_stage; ++l) act = moe_layer(dev, act, s, in, l, d);
      if (x < d.S - 1) send(dev, act, at(x + 1), "act");
      else last[static_cast<std::size_t>(c)] = act;
    }

    // Micro-batch c goes back to batch block c.
    Tensor encoded;
    if (x == d.S - 1) {
      for (int c = 0; c < d.S - 1; ++c) send(dev, last[static_cast<std::size_t>(c)], at(c), "to_batch");
      encoded = last.back();
    } else {
      encoded = recv(dev, at(d.S - 1), group, "to_batch");
    }

    // The softmax: my batch block's rows whole over Y, my vocabulary columns.
    const Tensor rows = all_gather(dev, encoded, {"Y"}, 0, "h_rows");
    return {{"embedded", embedded}, {"encoded", encoded}, {"p", split_softmax(dev, rows, in, d)}};
  };
}

NestedReference nested_reference(const NestedShape& s, const NestedInputs& in, const Mesh& mesh, DType t) {
  const Dims d = dims_of(s, mesh);
  const std::size_t B = s.batch, m = s.model, V = s.vocab, E = static_cast<std::size_t>(s.experts);
  NestedReference ref;
  Tensor h = xt::zeros<double>({B, m});
  for (std::size_t b = 0; b < B; ++b)
    std::copy_n(&in.embed(static_cast<std::size_t>(in.tokens(b)), 0), m, &h(b, 0));
  ref.embedded = h;
  std::vector<double> hid(s.hidden), y(m);
  for (int l = 0; l < s.layers; ++l) {
    Tensor next = h;
    std::vector<std::size_t> kept;
    for (std::size_t b = 0; b < B; ++b) {
      if (b % d.r == 0) kept.assign(E, 0);  // a new group: every expert empty again
      const std::vector<double> logits = token_logits(h, in.router[l], b, s.experts, t);
      const TokenRoute route = route_token(logits.data(), s.experts, s.top_k, t);
      std::vector<double> acc(m, 0.0);
      for (int k = 0; k < s.top_k; ++k) {
        const std::size_t e = static_cast<std::size_t>(route.experts[k]);
        ref.assignments += 1;
        if (kept[e] >= d.C) {
          ref.dropped += 1;
          continue;
        }
        kept[e] += 1;
        expert_forward(in.w_in[l], in.w_out[l], e, &h(b, 0), hid.data(), y.data(), m, s.hidden, t);
        for (std::size_t j = 0; j < m; ++j) acc[j] += route.gates[k] * y[j];
      }
      for (std::size_t j = 0; j < m; ++j) next(b, j) = round_to(t, h(b, j) + round_to(t, acc[j]));
    }
    h = next;
  }
  ref.encoded = h;
  // A plain softmax over the whole vocabulary, its sum in float64 from left to right.
  Tensor l = vocab_logits(h, in.unembed, 0, V, t);
  ref.p = xt::zeros<double>({B, V});
  ref.p_tolerance = ref.p;
  // The devices' sum of the row's exponentials (each e in t, the same bits here) differs from this
  // one only in its roundings: V/n terms summed in float64 on each device (at most V u64 of the
  // sum, as here), each device's sum rounded to t, and n - 1 ring adds in t, each within u_t of a
  // partial sum no larger than the whole (the terms are positive): delta = 2 V u64 + n u_t of the
  // sum, with 1% for the second-order terms. p = e / sum then moves by delta / (1 - delta) of
  // itself, and each side's rounding of p to t by u_t more.
  const double ut = unit_roundoff(t), u64 = unit_roundoff(DType::float64);
  const double delta = 1.01 * (2.0 * double(V) * u64 + d.n * ut);
  const double rel = (delta / (1 - delta) + 2 * ut * (1 + delta)) * (1 + ut);
  for (std::size_t b = 0; b < B; ++b) {
    const double most = *std::max_element(&l(b, 0), &l(b, 0) + V);
    double sum = 0;
    for (std::size_t v = 0; v < V; ++v) sum += l(b, v) = round_to(t, std::exp(l(b, v) - most));
    for (std::size_t v = 0; v < V; ++v) {
      ref.p(b, v) = round_to(t, l(b, v) / sum);
      ref.p_tolerance(b, v) = rel * ref.p(b, v);
    }
  }
  return ref;
}

const std::vector<NestedPart>& nested_parts() {
  static const std::vector<NestedPart> parts = {
      {"embedding", "batch (data parallel)", "vocabulary rows", "ReduceScatter over Y"},
      {"to stages", "batch block x -> stage 0", "-", "sends over X"},
      {"encoder experts", "-", "experts", "2 AllToAlls over Y a layer"},
      {"encoder stages", "pipeline stages", "-", "sends over X"},
      {"to batch", "last stage -> block c", "-", "sends over X"},
      {"softmax", "batch (data parallel)", "vocabulary columns", "AllGather, 2 AllReduces over Y"}};
  return parts;
}

std::string nested_part_of(const std::string& tensor) {
  if (tensor == "emb_partial") return "embedding";
  if (tensor == "to_stages") return "to stages";
  if (tensor == "dispatch" || tensor == "combine") return "encoder experts";
  if (tensor == "act") return "encoder stages";
  if (tensor == "to_batch") return "to batch";
  if (tensor == "h_rows" || tensor == "row_max" || tensor == "row_sum") return "softmax";
  return "";
}

std::map<std::string, double> nested_bytes(const NestedShape& s, const Mesh& mesh, int device, std::size_t element_bytes) {
  const Dims d = dims_of(s, mesh);
  const int x = mesh.coords(device)[0];
  const double eb = double(element_bytes), n1 = d.n - 1, group = double(d.r * s.model) * eb;
  std::map<std::string, double> b;
  b["embedding"] = n1 * group;  // a ring ReduceScatter of [n r, m]: n - 1 blocks of [r, m]
  b["to stages"] = x != 0 ? group : 0;
  // Per layer and micro-batch, two AllToAlls of [E, C, m]: all but its own E/n experts' slots.
  b["encoder experts"] = 2.0 * d.S * d.per_stage * n1 * double(s.experts / d.n) * double(d.C * s.model) * eb;
  b["encoder stages"] = x < d.S - 1 ? d.S * group : 0;
  b["to batch"] = x == d.S - 1 ? (d.S - 1) * group : 0;
  // AllGather of [r, m]; two ring AllReduces of [n r, 1], 2 (n - 1) r elements each.
  b["softmax"] = n1 * group + 2 * 2 * n1 * double(d.r) * eb;
  return b;
}

std::vector<Verdict> nested_checks(const NestedShape& s, const Mesh& mesh, const RunResult& run,
                                   const NestedReference& ref, std::size_t element_bytes) {
  Spec by_rows, by_block;
  by_rows.dims = {{"X", "Y"}, {}};
  by_block.dims = {{"X"}, {"Y"}};
  std::vector<Verdict> checks = {verify_output(mesh, by_rows, run, "embedded", ref.embedded),
                                 verify_output(mesh, by_rows, run, "encoded", ref.encoded),
                                 verify_output(mesh, by_block, run, "p", ref.p, ref.p_tolerance)};
  Verdict bytes;
  bytes.name = "bytes per part, every device = the formulas";
  for (int dev = 0; dev < mesh.devices() && bytes.pass; ++dev) {
    std::map<std::string, double> got;
    for (const auto& row : run.ledger)
      if (row.device == dev) got[nested_part_of(row.tensor)] += static_cast<double>(row.bytes_sent);
    const std::map<std::string, double> want = nested_bytes(s, mesh, dev, element_bytes);
    for (const auto& [part, b] : want)
      if (got[part] != b) {
        bytes.pass = false;
        bytes.detail = "device " + std::to_string(dev) + " sent " + std::to_string(static_cast<long long>(got[part])) +
                       " B in '" + part + "', the formula says " + std::to_string(static_cast<long long>(b));
        break;
      }
    if (bytes.pass && got.count("") && got[""] > 0) bytes.pass = false, bytes.detail = "bytes outside every part";
  }
  checks.push_back(bytes);
  return checks;
}

std::string nested_bytes_table(const NestedShape& s, const Mesh& mesh, const RunResult& run, std::size_t element_bytes,
                               std::map<std::string, double>& numbers, const std::string& indent) {
  Table t({"part", "moves", "calls", "busiest (B)", "formula (B)", "all (B)"});
  for (const NestedPart& p : nested_parts()) {
    std::vector<double> sent(static_cast<std::size_t>(mesh.devices()), 0), calls = sent;
    for (const auto& row : run.ledger)
      if (nested_part_of(row.tensor) == p.name && row.op != "recv") {
        sent[static_cast<std::size_t>(row.device)] += static_cast<double>(row.bytes_sent);
        calls[static_cast<std::size_t>(row.device)] += 1;
      }
    const auto most = std::max_element(sent.begin(), sent.end());
    const std::size_t busiest = static_cast<std::size_t>(most - sent.begin());
    double total = 0;
    for (double b : sent) total += b;
    t.add({p.name, p.moves, format_number(calls[busiest], "%.0f"), format_number(*most, "%.0f"),
           format_number(nested_bytes(s, mesh, static_cast<int>(busiest), element_bytes).at(p.name), "%.0f"),
           format_number(total, "%.0f")});
    std::string key = p.name;
    std::replace(key.begin(), key.end(), ' ', '_');
    numbers["bytes_" + key] = *most;
    numbers["bytes_all_" + key] = total;
  }
  return t.text(indent) + indent + "calls, busiest: the device that sent most in the part; formula: its bytes by the model\n";
}

NestedRun run_nested_sim(const NestedShape& s, const Mesh& mesh, DType t, std::uint64_t seed) {
  check_nested(s, mesh);
  Runtime rt(Backend::sim, false, t);
  rt.set_replay(t == DType::bfloat16);
  const NestedInputs in = nested_inputs(s, seed);
  NestedRun r{rt.run(mesh, nested_program(s, in)), nested_reference(s, in, mesh, t), {}};
  r.checks = nested_checks(s, mesh, r.run, r.ref, element_bytes(t));
  cover_by_replays(r.checks, rt.replays());
  return r;
}

}  // namespace shardlab
