// Lesson 02 - a reduction over a sharded axis needs AllReduce (article 000).
//
// One idea: summing X[input_rows, input_cols] over input_cols when input_cols is split over the
// mesh columns leaves each device with only a partial sum of its 16 rows. Adding those partial
// sums across the mesh columns (AllReduce) gives every device of a mesh row the full answer, so any
// one mesh column holds the whole result. ReduceScatter does the same sum but leaves the result
// split, for half the bytes. A bias named input_rows, split by the same mapping, is added by name
// with no communication at all.
//
// Run:    build/bin/02_reduction_allreduce [--mesh mesh_rows=2,mesh_cols=4] [--mapping ...] [--json]
// Prints: the mesh; each device's block and its 16 partial sums; the AllReduce and ReduceScatter
//         with bytes per device (measured and predicted); the named bias; the verdicts.
#include <xtensor/xreducer.hpp>

#include "collectives/collectives.hpp"
#include "core/layout.hpp"
#include "core/named.hpp"
#include "harness/cli/cli.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"

using namespace shardlab;

int main(int argc, char** argv) {
  Cli cli("02_reduction_allreduce", "Lesson 02: a sum over a sharded axis needs AllReduce", "mesh_rows=2,mesh_cols=4");
  std::string mapping_flag = "input_rows:mesh_rows,input_cols:mesh_cols";
  cli.option("--mapping", mapping_flag, "tensor-axis to mesh-axis mapping");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("02_reduction_allreduce", cli.common);
    const Mesh& mesh = session.mesh();
    const Shape shape = {32, 256};
    const AxisMapping mapping = parse_mapping(mapping_flag);
    check_mapping_names(mapping, {"input_rows", "input_cols"}, "x");
    const Spec x_spec = spec_from_mapping({"input_rows", "input_cols"}, mapping, mesh, "x", shape);
    const Spec bias_spec = spec_from_mapping({"input_rows"}, mapping, mesh, "bias", {shape[0]});
    const auto rows = x_spec.dims[0], cols = x_spec.dims[1];  // mesh axes of each tensor axis
    const Shape block = local_shape(mesh, x_spec, shape);
    // The sum keeps x's row split and is replicated along the axes that split the columns.
    Spec sum_spec = bias_spec;
    // ReduceScatter splits the summed rows further over the column axes: (rows..., cols...).
    Spec scattered = sum_spec;
    scattered.dims[0].insert(scattered.dims[0].end(), cols.begin(), cols.end());
    scattered.validate(mesh, {shape[0]}, "S");

    // Integers small enough that every sum is exact in the element type: a row of 256 sums to at
    // most 2304 from [-9, 9] (exact in float32 and float64), to at most 256 from [-1, 1] (bfloat16).
    const int lim = session.dtype() == DType::bfloat16 ? 1 : 9;
    const Tensor x = random_integers(shape, cli.common.seed, -lim, lim);
    const Tensor bias = random_integers({shape[0]}, cli.common.seed + 1, -lim, lim);
    const Tensor want_sum = xt::sum(x, {1}, xt::evaluation_strategy::immediate);

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ", mapping " << mapping_text(mapping) << "\n" << mesh.picture() << "\n";
    out << "2. Layout. " << layout_summary(mesh, x_spec, shape, "x", {"R", "C"}) << "\n"
        << blocks_picture(mesh, x_spec, shape)
        << (cols.empty()
                ? "   Each device sums its block over input_cols, which no mesh axis splits: its " +
                      std::to_string(block[0]) + " sums\n   are complete, " + sum_spec.notation("S", {"R"}) +
                      ", and nothing needs adding across devices:\n"
                : "   Each device sums its block over input_cols: " + std::to_string(block[0]) +
                      " partial sums per device,\n   " + sum_spec.notation("S", {"R"}) + "{U_" + axes_text(cols) +
                      "}: each is only part of the answer ({U_" + axes_text(cols) + "}: still to be summed over " +
                      axes_text(cols) + "):\n")
        << mesh.picture([&](int) { return std::to_string(block[0]); }) << "\n";

    RunResult run = session.run([&](Device& dev) -> Outputs {
      Tensor mine = local_block(x, mesh, x_spec, dev.id());
      Tensor partial = xt::sum(mine, {1}, xt::evaluation_strategy::immediate);  // [16], partial over cols
      Tensor full = all_reduce(dev, partial, cols, "S");                          // [16], complete
      Tensor part = reduce_scatter(dev, partial, cols, 0, "S");                   // [16/n], complete
      // The bias is named input_rows and split by the same mapping: its block lines up with
      // this device's rows, so X + bias matches dims by name and needs no message.
      NamedTensor xb = named_add({{"input_rows", "input_cols"}, mine},
                                 {{"input_rows"}, local_block(bias, mesh, bias_spec, dev.id())});
      return {{"allreduce", full}, {"scatter", part}, {"x_plus_bias", xb.data}};
    });
    if (session.runtime().is_root()) {
      // Every device sums the same number of terms; integers keep it exact, the bound covers floats.
      const double tol = integer_sum_tolerance(shape[1], lim, session.dtype(), mesh.devices());
      auto& checks = session.report().checks;
      checks.push_back(verify_output(mesh, sum_spec, run, "allreduce", want_sum, tol));
      checks.push_back(verify_output(mesh, scattered, run, "scatter", want_sum, tol));
      const Tensor want_xb = named_add({{"input_rows", "input_cols"}, x}, {{"input_rows"}, bias}).data;
      checks.push_back(verify_output(mesh, x_spec, run, "x_plus_bias", want_xb));
      checks[0].name = "sum after all_reduce";
      checks[1].name = "sum after reduce_scatter";
      checks[2].name = "x + bias by name";

      const auto& c = session.report().collectives;
      if (cols.empty())
        out << "3. Communication: none. input_cols is not split, so the sums are already complete; the\n"
               "   two collectives below run on groups of 1 and send nothing:\n"
            << collectives_table(c)
            << "   Map input_cols to a mesh axis (the default mapping, input_cols:mesh_cols) to see them work.\n";
      else
        out << "3. Communication over " << axes_text(cols) << " (groups of "
          << mesh.axes_size(cols) << "):\n" << collectives_table(c)
          << "   AllReduce: every device of a mesh row ends with all " << block[0] << " sums, "
          << sum_spec.notation("S", {"R"}) << ".\n   So any one mesh column holds the full 32-vector; the replica check below proves\n"
          << "   every column agrees.\n"
          << "   ReduceScatter: each device keeps " << block[0] / mesh.axes_size(cols) << " finished sums, "
          << scattered.notation("S", {"R"}) << ",\n   for " << c[1].bytes_per_device << " bytes instead of "
          << c[0].bytes_per_device << ".\n";
      out << "   Bias: " << bias_spec.notation("bias", {"R"}) << " lines up with x's rows by name; 0 bytes.\n\n"
          << "4. Verdict against the unsharded computation:\n";
      for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
    }
    out << "\nTakeaway: reducing over a sharded axis leaves partial sums; AllReduce completes them on every\n"
           "          device (2(n-1)/n of the data sent), ReduceScatter completes them split ((n-1)/n).\n"
           "Next:     build/bin/03_dot_product_and_matmul\n"
           "          a matmul is a sum of products, so it shards the same way.\n"
           "Exercise: build/bin/shardlab exercise --lesson 02\n";
    return session.finish();
  });
}
