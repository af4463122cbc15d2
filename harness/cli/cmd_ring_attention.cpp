#include "harness/cli/cmd_ring_attention.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cost/topology.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/ring_attention.hpp"

namespace shardlab {

namespace {

struct RingOptions {
  CommonOptions common;
  int devices = 4, chunk = 8, head = 16;
  std::string order = "balanced";
  double tokens = 0, width = 4096;
  bool tokens_given = false;
};

std::string ring_num(double x) { return format_number(x, "%.4g"); }

Verdict ring_claim(const std::string& name, bool pass, const std::string& detail) {
  Verdict v;
  v.name = name;
  v.pass = pass;
  v.detail = pass ? "" : detail;
  return v;
}

int run(RingOptions o) {
  // Every value is checked before anything is printed or allocated.
  if (o.chunk < 1 || o.head < 1)
    throw Error(ErrorKind::parse, "--chunk and --head must be at least 1, not " + std::to_string(o.chunk) + " and " +
                                      std::to_string(o.head));
  RingConfig c;
  c.devices = o.devices;
  c.chunk = static_cast<std::size_t>(o.chunk);
  c.head = static_cast<std::size_t>(o.head);
  c.seed = o.common.seed;
  const RingOrder order = parse_ring_order(o.order);
  // --tokens prices one step of a real ring: whole tokens, at least one chunk per device's 2.
  if (o.tokens_given && !(o.tokens >= 2.0 * c.devices && o.tokens <= 1e12 && o.tokens == std::floor(o.tokens)))
    throw Error(ErrorKind::parse, "--tokens must be a whole number from 2 x --devices (" + std::to_string(2 * c.devices) +
                                      ") to 1e12, not " + ring_num(o.tokens));
  if (!(o.width >= 1 && o.width <= 1e9 && o.width == std::floor(o.width)))
    throw Error(ErrorKind::parse, "--width must be a whole number from 1 to 1e9, not " + ring_num(o.width));
  check_ring(c);
  o.common.mesh = "X=" + std::to_string(c.devices);
  Session session("ring-attention", o.common);
  auto& out = session.out();
  const std::size_t eb = session.element_bytes(), n = std::size_t(c.devices);
  out << "shardlab ring-attention: one causal head, S = " << c.tokens() << " tokens in " << 2 * n << " chunks of "
      << c.chunk << ", head size " << c.head << ",\n  on a ring of " << n << " devices, " << ring_order_name(order)
      << " order, " << session.options().backend << " backend\n\n";
  const RingInputs in = ring_inputs(c, session.dtype());
  const RunResult r = session.run([&](Device& dev) { return ring_attention_device(dev, in, c, order, "X"); });
  if (!session.runtime().is_root()) return session.finish();
  Report& report = session.report();

  std::vector<std::size_t> sent(n, 0);
  for (const auto& row : r.ledger) sent[std::size_t(row.device)] += row.bytes_sent;
  const std::size_t formula = ring_forward_bytes(c, eb) + ring_backward_bytes(c, eb);
  double lo = 1e300, hi = 0, peak = 0;
  Table t({"device", "chunks", "forward FLOPs", "backward FLOPs", "bytes sent", "peak bytes"});
  for (std::size_t i = 0; i < n; ++i) {
    const Outputs& d = r.outputs[i];
    const auto ch = ring_chunks(order, int(i), int(n));
    lo = std::min(lo, d.at("flops")(0));
    hi = std::max(hi, d.at("flops")(0));
    peak = std::max(peak, d.at("peak_bytes")(0));
    t.add({std::to_string(i), std::to_string(ch[0]) + ", " + std::to_string(ch[1]), ring_num(d.at("flops")(0)),
           ring_num(d.at("flops")(1)), std::to_string(sent[i]), ring_num(d.at("peak_bytes")(0))});
  }
  out << t.text() << "  bytes per device by formula: 2(n-1) + 4(n-1) + 2 blocks of [" << 2 * c.chunk << ", "
      << c.head << "] = " << formula << " B; plain attention on one device holds "
      << plain_attention_bytes(c, eb) << " B\n\n";
  const double block = 4.0 * double(c.chunk * c.chunk * c.head);
  bool bytes_ok = true;
  for (std::size_t s : sent) bytes_ok = bytes_ok && s == formula;
  std::vector<Verdict> checks = {
      ring_claim("bytes per device equal the formula", bytes_ok, "device 0 sent " + std::to_string(sent[0])),
      ring_claim(order == RingOrder::balanced ? "forward FLOPs equal on every device within one block"
                                         : "forward FLOPs differ by 4(n-1) blocks (contiguous order)",
            order == RingOrder::balanced ? hi - lo <= block : hi - lo == 4.0 * double(n - 1) * block,
            "spread " + ring_num(hi - lo) + " FLOPs, a block " + ring_num(block)),
      // At most 1/n of plain attention's only while the scores dominate (d + c <= 4nc): a formula.
      ring_claim("peak memory per device equals 9 blocks [2c, d] + 2 rows + 2 [c, c] = " +
                     std::to_string(ring_peak_bytes(c, eb)) + " B",
                 peak == double(ring_peak_bytes(c, eb)), ring_num(peak) + " B on some device")};
  for (const Verdict& v : ring_attention_checks(r, in, c, order, session.dtype(), "")) checks.push_back(v);
  out << "Checks:\n";
  for (const Verdict& v : checks) {
    report.checks.push_back(v);
    out << "  " << v.name << ": " << check_text(v) << "\n";
  }
  report.numbers["bytes_formula"] = double(formula);
  report.numbers["flops_spread"] = hi - lo;
  report.numbers["peak_bytes_per_device"] = peak;
  report.numbers["plain_peak_bytes"] = double(plain_attention_bytes(c, eb));

  if (o.tokens_given) {
    out << "\nCost model: one forward ring step at S = " << ring_num(o.tokens) << " tokens on " << n
        << " devices, width " << ring_num(o.width) << ":\n";
    Table cost({"preset", "wiring", "transfer_us", "compute_us", "hidden"});
    for (const auto& hw : hardware_presets()) {
      const RingStepCost s = ring_step_cost(o.tokens, c.devices, o.width, hw);
      cost.add({hw.name, topology_text(hw), ring_num(s.transfer_s * 1e6), ring_num(s.compute_s * 1e6),
                s.compute_s >= s.transfer_s ? "yes" : "no"});
      report.numbers[hw.name + "_step_transfer_s"] = s.transfer_s;
      report.numbers[hw.name + "_step_compute_s"] = s.compute_s;
    }
    out << cost.text();
  }
  return session.finish();
}

}  // namespace

Command add_ring_attention_command(CLI::App& app) {
  auto o = std::make_shared<RingOptions>();
  auto* c = app.add_subcommand("ring-attention", "context parallelism: causal ring attention over collective_permute "
                                                 "(lesson 19), verified against unsharded attention");
  c->add_option("--devices", o->devices, "devices on the ring")->capture_default_str();
  c->add_option("--chunk", o->chunk, "tokens per chunk (the sequence is 2 x devices chunks)")->capture_default_str();
  c->add_option("--head", o->head, "head size d")->capture_default_str();
  c->add_option("--order", o->order, "balanced (device i: chunks i, 2n-1-i) or contiguous")->capture_default_str();
  c->add_option("--tokens", o->tokens, "also price one ring step at this many tokens on the presets (e.g. 131072)")
      ->each([o](const std::string&) { o->tokens_given = true; });
  c->add_option("--width", o->width, "model width for --tokens (heads x head size)")->capture_default_str();
  add_run_options(c, o->common, "<devices>");
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
