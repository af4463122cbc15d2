// Lesson 07 - full sharding: both operands split over both mesh axes (article 001).
//
// One idea: split B's outer dim (its columns) over Y as well. After gathering K as in Case 1B,
// the device at X=x, Y=y multiplies the x-th rows of A by the y-th columns of B: a block of C that
// no other device computes. The mesh holds one copy of A, of B and of C, does each multiply once,
// and C comes out split the same way as its inputs, ready for the next layer.
//
// Run:    build/bin/07_full_sharding [--mesh X=2,Y=4] [--shape 4,16,4] [--backend sim|mpi] [--json]
//         mpiexec -n 8 build/bin/07_full_sharding --backend mpi
// Prints: the mesh; A[I_X, K_Y] and B[K_X, J_Y] with each device's blocks; the two AllGathers with
//         bytes per device (measured and predicted); C[I_X, J_Y] per device; FLOPs and memory per
//         device against Case 2; the verdict.
#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/layout.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/matmul_case.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"

using namespace shardlab;

int main(int argc, char** argv) {
  Cli cli("07_full_sharding", "Lesson 07: A and B split over both mesh axes, no duplicated work", "X=2,Y=4");
  std::string shape = "4,16,4";
  cli.option("--shape", shape, "m,k,n: A is m x k, B is k x n");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("07_full_sharding", cli.common);
    const Mesh& mesh = session.mesh();
    const MatmulCase c = matmul_case(mesh, shape, "X,Y", "X,Y", cli.common.seed, session.element_bytes());
    const std::string &X = c.x, &Y = c.y;
    const Spec c_spec = case_spec(mesh, "X,Y");
    const std::size_t mx = c.m / mesh.axis_size(X), ny = c.n / mesh.axis_size(Y);

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";
    out << "2. Specs. " << c.a_spec.notation("A", {"I", "K"}) << " and " << c.b_spec.notation("B", {"K", "J"})
        << ": every dim of both is split; one copy of each over the mesh.\n"
        << inputs_text(mesh, c)
        << "   K still disagrees (" << Y << " in A, " << X << " in B): gather it. The outer dims stay split: A's rows\n"
        << "   over " << X << ", B's columns over " << Y << ". They sit on different mesh axes, so every pair of "
        << "row block\n   and column block meets on exactly one device.\n\n";

    RunResult run = session.run([&](Device& dev) -> Outputs {
      const Tensor a = local_block(c.a, mesh, c.a_spec, dev.id());  // [m/|X|, k/|Y|]
      const Tensor b = local_block(c.b, mesh, c.b_spec, dev.id());  // [k/|X|, n/|Y|]
      const Tensor a_rows = all_gather(dev, a, {Y}, 1, "A");        // [m/|X|, k]
      const Tensor b_cols = all_gather(dev, b, {X}, 0, "B");        // [k, n/|Y|]
      const Tensor mine = matmul(a_rows, b_cols);                   // [m/|X|, n/|Y|], unique to this device
      const std::size_t held = (a_rows.size() + b_cols.size() + mine.size()) * session.element_bytes();
      return with_work({{"C", mine}}, 2.0 * mx * c.k * ny, held);
    });

    // The search's plan for the same case, run and verified when it moves fewer bytes (every rank).
    const CheaperPlan cheaper = run_cheaper_plan(session.runtime(), mesh, c, session.dtype());

    if (session.runtime().is_root()) {
      auto& checks = session.report().checks;
      // Integers in [-4, 4]: exact while 16 k stays within the type's exact integers (k <= 16 in
      // bfloat16); else the one checker's bound (verify_matmul).
      checks.push_back(verify_matmul(mesh, c_spec, run, "C", c, session.dtype()));
      checks.back().name = "C, split like A and B";
      checks.push_back(planner_agrees(c.plan, session.report().collectives));
      checks.insert(checks.end(), cheaper.checks.begin(), cheaper.checks.end());

      out << "3. Communication: the AllGathers of Case 1B, on blocks of A and B that are now both small.\n"
          << collectives_table(session.report().collectives) << "\n";
      const Plan case_2 = case_plan(mesh, c, "X,Y", "X,_");
      out << "4. Work. Device (x, y) computes the " << mx << "x" << ny << " block of C at rows x, columns y: "
          << c_spec.notation("C", {"I", "J"}) << ".\n"
          << work_text(mesh, run, c.plan.unsharded_flops(), (c.m * c.k + c.k * c.n + c.m * c.n) * session.element_bytes())
          << "   Devices multiplying the very same blocks: " << same_work_groups(mesh, c.plan) << "\n"
          << "   Case 2 (lesson 06) on the same shapes: " << cost_text(case_2) << ".\n   Here:"
          << std::string(34, ' ') << cost_text(c.plan) << ".\n"
          << "   Splitting B's columns over " << Y << " removes the last duplicated work (along " << Y
          << ") and shrinks B's gather.\n"
          << "   C as each device ends (rows:cols):\n"
          << blocks_picture(mesh, c_spec, {c.m, c.n}) << "\n";
      out << "5. Verdict against A B on one device:\n";
      for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
      out << "   The planner's article rules derive the same from the specs alone (shardlab matmul --plan article\n"
          << "   --mesh " << mesh.text() << " --a-spec " << c.a_spec.text() << " --b-spec " << c.b_spec.text()
          << "):\n   " << plan_summary(c.plan) << "\n"
          << cheaper.text;
    }
    out << "\nTakeaway: split the outer dims of A and B over different mesh axes and gather only the summed\n"
           "          dim: each device computes a block of C nobody else does, and C keeps the inputs' split.\n"
           "Next:     build/bin/08_gspmd_ffn\n"
           "          the GSPMD feed-forward layer: two such matmuls, with AllGather and ReduceScatter.\n"
           "          The planner's article rules already derive it (quoted: -> means a file to the shell):\n"
           "          build/bin/shardlab einsum 'bsm,mh->bsh' --plan article --specs X,_,Y X,Y \\\n"
           "            --out-spec X,_,Y --dims b=8,s=4,m=16,h=64\n"
           "Exercise: build/bin/shardlab exercise --lesson 07\n";
    return session.finish();
  });
}
