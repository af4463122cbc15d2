// Lesson 04 - Case 1A: the inner axes are split over the same mesh axis (article 001).
//
// One idea: when A's columns and B's rows (the dim K that a matmul sums over) are cut into the
// same pieces on the same devices, each device can multiply its two blocks straight away. What it
// gets is not a block of C but all of C with only some of the terms of every dot product: a
// partial sum. One AllReduce over Y adds the pieces and leaves the full C on every device. The
// second mesh axis, X, plays no part, so the two halves of the mesh do the same work twice.
//
// Run:    build/bin/04_inner_axes_match [--mesh X=2,Y=4] [--shape 4,16,4] [--backend sim|mpi] [--json]
//         mpiexec -n 8 build/bin/04_inner_axes_match --backend mpi
// Prints: the mesh; the specs A[I, K_Y] and B[K_Y, J] with each device's blocks; the partial
//         products; the AllReduce with bytes per device (measured and predicted); FLOPs and memory
//         per device against the unsharded product; the verdict.
#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/layout.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/matmul_case.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"

using namespace shardlab;

int main(int argc, char** argv) {
  Cli cli("04_inner_axes_match", "Lesson 04 (Case 1A): inner axes split over the same mesh axis", "X=2,Y=4");
  std::string shape = "4,16,4";
  cli.option("--shape", shape, "m,k,n: A is m x k, B is k x n");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("04_inner_axes_match", cli.common);
    const Mesh& mesh = session.mesh();
    const MatmulCase c = matmul_case(mesh, shape, "_,Y", "Y,_", cli.common.seed, session.element_bytes());
    const std::string& Y = c.y;
    // C = A B on every device is a sum of partial products, one per Y slice of K.
    Spec partial_spec = Spec::replicated(2);
    partial_spec.partial = {Y};
    const Spec c_spec = Spec::replicated(2);
    const std::size_t ky = c.k / mesh.axis_size(Y);

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";
    out << "2. Specs. " << c.a_spec.notation("A", {"I", "K"}) << " and " << c.b_spec.notation("B", {"K", "J"})
        << ": K, the dim the matmul sums over, is split over " << Y << " in both.\n"
        << inputs_text(mesh, c)
        << "   A device's columns of A are exactly its rows of B, so it can multiply them at once:\n"
        << "   [" << c.m << " x " << ky << "] by [" << ky << " x " << c.n << "]. The " << c.m << "x" << c.n
        << " result has only " << ky << " of the " << c.k << " terms of each dot product: "
        << partial_spec.notation("C", {"I", "J"}) << ",\n   a partial sum over " << Y << " ({U_" << Y
        << "}: unreduced over " << Y << ", still to be added across " << Y << ").\n   C is the sum of "
        << mesh.axis_size(Y) << " such products, one per " << Y << " slice of K.\n";
    if (const int d = article_device(mesh); d >= 0)
      out << "   So d" << d << " (" << c.x << "=0, " << Y << "=1) multiplies the second slices of K: it computes\n"
          << "   what the article calls C2 = A2 B2, one of the " << mesh.axis_size(Y) << " partial products.\n";
    out << "\n";

    RunResult run = session.run([&](Device& dev) -> Outputs {
      const Tensor a = local_block(c.a, mesh, c.a_spec, dev.id());  // [m, k/|Y|]
      const Tensor b = local_block(c.b, mesh, c.b_spec, dev.id());  // [k/|Y|, n]
      const Tensor partial = matmul(a, b);                          // [m, n], partial over Y
      const Tensor full = all_reduce(dev, partial, {Y}, "C");       // [m, n], the sum over Y
      const std::size_t held = (a.size() + b.size() + full.size()) * session.element_bytes();
      return with_work({{"partial", partial}, {"C", full}}, 2.0 * c.m * ky * c.n, held);
    });

    // The search's plan for the same case, run and verified when it moves fewer bytes (every rank).
    const CheaperPlan cheaper = run_cheaper_plan(session.runtime(), mesh, c, session.dtype());

    if (session.runtime().is_root()) {
      // Integers in [-4, 4]: exact while 16 k stays within the type's exact integers (k <= 16 in
      // bfloat16); else the one checker's bound (verify_matmul).
      auto& checks = session.report().checks;
      checks.push_back(verify_matmul(mesh, partial_spec, run, "partial", c, session.dtype()));
      checks.back().name = "partial products sum to C, X-replicas identical";
      checks.push_back(verify_matmul(mesh, c_spec, run, "C", c, session.dtype()));
      checks.back().name = "C after all_reduce";
      checks.push_back(planner_agrees(c.plan, session.report().collectives));
      checks.insert(checks.end(), cheaper.checks.begin(), cheaper.checks.end());

      const std::size_t c_bytes = c.m * c.n * session.element_bytes();
      out << "3. Communication. AllReduce over " << Y << ": each group of " << mesh.axis_size(Y)
          << " devices adds its partial products;\n   every member gets the sum.\n"
          << collectives_table(session.report().collectives) << "   The ring sends 2(n-1)/n of the " << c_bytes
          << "-byte C per device.\n\n";
      out << "4. Work.\n"
          << work_text(mesh, run, c.plan.unsharded_flops(), (c.m * c.k + c.k * c.n + c.m * c.n) * session.element_bytes())
          << "   Devices multiplying the very same blocks: " << same_work_groups(mesh, c.plan) << "\n"
          << "   Along " << c.x << " nothing is split, so each " << c.x
          << " slice of the mesh repeats the other's work (and memory).\n"
          << "   C as each device ends (rows:cols):\n"
          << blocks_picture(mesh, c_spec, {c.m, c.n}) << "\n";
      out << "5. Verdict against A B on one device:\n";
      for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
      out << "   The planner's article rules derive the same from the specs alone (shardlab matmul --plan article\n"
          << "   --mesh " << mesh.text() << " --a-spec " << c.a_spec.text() << " --b-spec " << c.b_spec.text()
          << "):\n   " << plan_summary(c.plan) << "\n"
          << cheaper.text;
    }
    out << "\nTakeaway: split the summed dim the same way in both operands, multiply the blocks locally, and\n"
           "          one AllReduce finishes C. Any mesh axis that splits neither operand only repeats work.\n"
           "Next:     build/bin/05_inner_axes_mismatch\n"
           "          the same dim split over different mesh axes cannot be multiplied.\n"
           "Exercise: build/bin/shardlab exercise --lesson 04\n";
    return session.finish();
  });
}
