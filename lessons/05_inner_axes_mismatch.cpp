// Lesson 05 - Case 1B: the inner axes are split over different mesh axes (article 001).
//
// One idea: if A's columns are cut over Y but B's rows over X, a device holds one stretch of K
// from A and a different stretch (of a different length) from B. Their product means nothing.
// The fix is to undo both cuts: AllGather A over Y and B over X, so every device has all of K,
// then multiply in full. It works, but every device now does the whole matmul: the sharding
// saved memory at rest and nothing else.
//
// Run:    build/bin/05_inner_axes_mismatch [--mesh X=2,Y=4] [--shape 4,16,4] [--backend sim|mpi] [--json]
//         mpiexec -n 8 build/bin/05_inner_axes_mismatch --backend mpi
// Prints: the mesh; A[I, K_Y] and B[K_X, J] with each device's blocks and stretch of K; why they
//         cannot be multiplied; the two AllGathers with bytes per device (measured and predicted);
//         FLOPs and memory per device against Case 1A; the verdict.
#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/matmul_case.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"

using namespace shardlab;

int main(int argc, char** argv) {
  Cli cli("05_inner_axes_mismatch", "Lesson 05 (Case 1B): inner axes split over different mesh axes", "X=2,Y=4");
  std::string shape = "4,16,4";
  cli.option("--shape", shape, "m,k,n: A is m x k, B is k x n");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("05_inner_axes_mismatch", cli.common);
    const Mesh& mesh = session.mesh();
    const MatmulCase c = matmul_case(mesh, shape, "_,Y", "X,_", cli.common.seed, session.element_bytes());
    const std::string &X = c.x, &Y = c.y;
    const Spec c_spec = Spec::replicated(2);

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";
    out << "2. Specs. " << c.a_spec.notation("A", {"I", "K"}) << " and " << c.b_spec.notation("B", {"K", "J"})
        << ": K is split over " << Y << " in A but over " << X << " in B.\n"
        << inputs_text(mesh, c) << "   The stretch of K each device holds, from A | from B:\n"
        << mesh.picture([&](int d) {
             const Block a = block_of(mesh, c.a_spec, {c.m, c.k}, d), b = block_of(mesh, c.b_spec, {c.k, c.n}, d);
             return std::to_string(a.start[1]) + ":" + std::to_string(a.stop[1]) + " | " +
                    std::to_string(b.start[0]) + ":" + std::to_string(b.stop[0]);
           });
    // Try it on device 1: its blocks of A and B, multiplied as they are.
    const Tensor a1 = local_block(c.a, mesh, c.a_spec, 1), b1 = local_block(c.b, mesh, c.b_spec, 1);
    try {
      matmul(a1, b1);
      out << "   Device 1's blocks happen to fit in shape, but they cover different stretches of K: the\n"
             "   product would pair column j of A's block with row j of B's, which are different k's.\n";
    } catch (const Error& e) {
      out << "   Multiplying device 1's blocks as they are: " << e.what() << ".\n";
    }
    out << "   So undo both cuts: AllGather A over " << Y << " and B over " << X << ", then multiply in full.\n\n";

    RunResult run = session.run([&](Device& dev) -> Outputs {
      const Tensor a = local_block(c.a, mesh, c.a_spec, dev.id());  // [m, k/|Y|]
      const Tensor b = local_block(c.b, mesh, c.b_spec, dev.id());  // [k/|X|, n]
      const Tensor a_all = all_gather(dev, a, {Y}, 1, "A");         // [m, k]
      const Tensor b_all = all_gather(dev, b, {X}, 0, "B");         // [k, n]
      const Tensor full = matmul(a_all, b_all);                     // [m, n], every term
      const std::size_t held = (a_all.size() + b_all.size() + full.size()) * session.element_bytes();
      return with_work({{"C", full}}, 2.0 * c.m * c.k * c.n, held);
    });

    // The search's plan for the same case, run and verified when it moves fewer bytes (every rank).
    const CheaperPlan cheaper = run_cheaper_plan(session.runtime(), mesh, c, session.dtype());

    if (session.runtime().is_root()) {
      auto& checks = session.report().checks;
      // Integers in [-4, 4]: exact while 16 k stays within the type's exact integers (k <= 16 in
      // bfloat16); else the one checker's bound (verify_matmul).
      checks.push_back(verify_matmul(mesh, c_spec, run, "C", c, session.dtype()));
      checks.back().name = "C after the gathers";
      checks.push_back(planner_agrees(c.plan, session.report().collectives));
      checks.insert(checks.end(), cheaper.checks.begin(), cheaper.checks.end());

      out << "3. Communication. Each device receives the blocks it lacks: A's over " << Y << " (groups of "
          << mesh.axis_size(Y) << "),\n   B's over " << X << " (groups of " << mesh.axis_size(X) << ").\n"
          << collectives_table(session.report().collectives)
          << "   A ring AllGather sends n-1 blocks per device: no sums, so no partial results to reduce.\n\n";
      const Plan case_1a = case_plan(mesh, c, "_,Y", "Y,_");
      out << "4. Work.\n"
          << work_text(mesh, run, c.plan.unsharded_flops(), (c.m * c.k + c.k * c.n + c.m * c.n) * session.element_bytes())
          << "   Devices multiplying the very same blocks: " << same_work_groups(mesh, c.plan) << "\n"
          << "   Case 1A (lesson 04) on the same shapes: " << cost_text(case_1a) << ".\n   Here:"
          << std::string(35, ' ') << cost_text(c.plan) << ".\n"
          << "   The mismatch costs more bytes and gives back the whole compute saving.\n"
          << "   C as each device ends (rows:cols):\n"
          << blocks_picture(mesh, c_spec, {c.m, c.n}) << "\n";
      out << "5. Verdict against A B on one device:\n";
      for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
      out << "   The planner's article rules derive the same from the specs alone (shardlab matmul --plan article\n"
          << "   --mesh " << mesh.text() << " --a-spec " << c.a_spec.text() << " --b-spec " << c.b_spec.text()
          << "):\n   " << plan_summary(c.plan) << "\n"
          << cheaper.text;
    }
    out << "\nTakeaway: blocks of a summed dim can only be multiplied if both operands cut it the same way;\n"
           "          otherwise AllGather both back to whole, and the mesh multiplies everything everywhere.\n"
           "Next:     build/bin/06_outer_axes\n"
           "          split the outer dim of A too, and each half of the mesh computes half of C.\n"
           "Exercise: build/bin/shardlab exercise --lesson 05\n";
    return session.finish();
  });
}
