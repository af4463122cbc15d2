// Lesson 01 - mesh and layout (article 000, T5 / Mesh-TensorFlow style).
//
// One idea: a mesh of devices plus a mapping from the tensor's named axes to the mesh's axes
// decides which block of the tensor each device holds. An elementwise function (ReLU) then runs
// on every block with no communication at all, and stitching the blocks back gives ReLU of the
// whole tensor.
//
// Run:    build/bin/01_mesh_and_layout [--mesh mesh_rows=2,mesh_cols=4] [--mapping input_rows:mesh_rows]
// Prints: the same 8 devices as four mesh shapes; the 32x256 tensor under three mappings (empty,
//         rows only, rows and columns) with each device's block; the (empty) communication table;
//         the verdict against ReLU of the unsharded tensor.
#include <xtensor/xmath.hpp>

#include "collectives/runtime.hpp"
#include "core/layout.hpp"
#include "core/named.hpp"
#include "harness/cli/cli.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"

using namespace shardlab;

int main(int argc, char** argv) {
  Cli cli("01_mesh_and_layout", "Lesson 01: which block of a tensor each device of a mesh holds", "mesh_rows=2,mesh_cols=4");
  std::string mapping_flag;
  cli.option("--mapping", mapping_flag,
             "tensor-axis to mesh-axis mapping, e.g. input_rows:mesh_rows,input_cols:mesh_cols (default: show three)");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("01_mesh_and_layout", cli.common);
    const Mesh& mesh = session.mesh();
    const Shape shape = {32, 256};
    const std::vector<std::string> names = {"input_rows", "input_cols"};

    // Three mappings by default, written against this mesh's first two axes.
    std::vector<AxisMapping> mappings;
    if (!mapping_flag.empty()) {
      mappings.push_back(parse_mapping(mapping_flag));
      check_mapping_names(mappings.back(), names, "x");
    } else {
      mappings.push_back({});
      mappings.push_back({{"input_rows", mesh.names()[0]}});
      if (mesh.rank() >= 2) mappings.push_back({{"input_rows", mesh.names()[0]}, {"input_cols", mesh.names()[1]}});
    }
    std::vector<Spec> specs;  // validate every mapping before printing anything
    for (const auto& m : mappings) specs.push_back(spec_from_mapping(names, m, mesh, "x", shape));

    auto& out = session.out();
    out << "1. Mesh. The same 8 devices can be arranged in several shapes:\n\n";
    for (const char* m : {"devices=8", "mesh_rows=2,mesh_cols=4", "mesh_rows=4,mesh_cols=2", "X=2,Y=2,Z=2"})
      out << "mesh " << m << "\n" << Mesh::parse(m).picture() << "\n";
    out << "The shape does not change the answer, only how the work is cut.\nThis run uses mesh " << mesh.text()
        << ":\n" << mesh.picture() << "\n";

    const Tensor x = random_integers(shape, cli.common.seed, -5, 5);  // X[input_rows=32, input_cols=256]
    const Tensor want = xt::maximum(x, 0.0);

    out << "2. Layouts. x is a [32, 256] tensor whose axes are named input_rows and input_cols. A mapping\n"
           "   sends named axes to mesh axes; each device then holds one block of x and applies ReLU to it.\n"
           "   R and C below are x's rows and columns; R_" << mesh.names()[0] << " says R is split over mesh axis "
        << mesh.names()[0] << ".\n";
    for (std::size_t i = 0; i < mappings.size(); ++i) {
      const Spec& spec = specs[i];
      const char part = static_cast<char>('a' + i);
      out << "\n2" << part << ". Mapping " << mapping_text(mappings[i]) << " gives spec " << spec.text() << "\n  "
          << layout_summary(mesh, spec, shape, "x", {"R", "C"}) << "\n"
          << "  Each box shows the rows:cols of x that device holds.\n"
          << blocks_picture(mesh, spec, shape);

      // Every device runs the same program on its own block: ReLU, elementwise, no messages.
      RunResult run = session.run([&](Device& dev) -> Outputs {
        Tensor block = local_block(x, mesh, spec, dev.id());
        return {{"relu", xt::maximum(block, 0.0)}};
      });
      if (!session.runtime().is_root()) continue;
      Verdict v = verify_output(mesh, spec, run, "relu", want);
      v.name = "relu under " + mapping_text(mappings[i]);
      session.report().checks.push_back(v);
      out << "  ReLU of a block needs only that block: no messages.\n"
          << "  Stitched blocks vs ReLU of the whole 32x256 tensor: " << v.line() << "\n";
    }
    if (!session.runtime().is_root()) return session.finish();

    out << "\n3. Communication. Every collective of this run, as the ledger counted it:\n"
        << collectives_table(session.report().collectives) << "\n";
    std::size_t passed = 0;
    for (const auto& v : session.report().checks) passed += v.pass ? 1 : 0;
    out << "4. Verdict. " << passed << " of " << mappings.size() << " layouts give the unsharded answer.\n\n";
    out << "Takeaway: a mapping from named tensor axes to mesh axes fixes each device's block; elementwise\n"
           "          work runs on the blocks independently, and stitching them gives the unsharded answer.\n"
           "Next:     build/bin/02_reduction_allreduce\n"
           "          a sum over a sharded axis needs communication (AllReduce).\n"
           "Exercise: build/bin/shardlab exercise --lesson 01\n";
    return session.finish();
  });
}
