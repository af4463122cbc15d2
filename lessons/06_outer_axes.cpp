// Lesson 06 - Case 2: split the outer dim of A as well (article 001).
//
// One idea: the rows of A (the dim that survives into C) can be split over X with no trouble at
// all: a row of C needs only the same row of A. After the gathers of Case 1B restore K, the X=0
// half of the mesh multiplies the first half of A's rows by all of B, the X=1 half the rest, and
// each half ends with its half of C. Read A as a batch of examples and B as weights, and this is
// data parallelism. Within a half, the devices along Y still repeat one another.
//
// Run:    build/bin/06_outer_axes [--mesh X=2,Y=4] [--shape 4,16,4] [--backend sim|mpi] [--json]
//         mpiexec -n 8 build/bin/06_outer_axes --backend mpi
// Prints: the mesh; A[I_X, K_Y] and B[K_X, J] with each device's blocks; the two AllGathers with
//         bytes per device (measured and predicted); C[I_X, J] per device; FLOPs and memory per
//         device against Case 1B; the verdict.
#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/layout.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/matmul_case.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"

using namespace shardlab;

int main(int argc, char** argv) {
  Cli cli("06_outer_axes", "Lesson 06 (Case 2): the outer dim of A split over X, data parallelism", "X=2,Y=4");
  std::string shape = "4,16,4";
  cli.option("--shape", shape, "m,k,n: A is m x k, B is k x n");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("06_outer_axes", cli.common);
    const Mesh& mesh = session.mesh();
    const MatmulCase c = matmul_case(mesh, shape, "X,Y", "X,_", cli.common.seed, session.element_bytes());
    const std::string &X = c.x, &Y = c.y;
    const Spec c_spec = case_spec(mesh, "X,_");
    const std::size_t mx = c.m / mesh.axis_size(X);

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";
    out << "2. Specs. " << c.a_spec.notation("A", {"I", "K"}) << " and " << c.b_spec.notation("B", {"K", "J"})
        << ": as in Case 1B, plus A's rows split over " << X << ".\n"
        << inputs_text(mesh, c)
        << "   One copy of A is now spread over the whole mesh. K still disagrees (" << Y << " in A, " << X
        << " in B),\n   so gather it as in Case 1B; the rows of A stay where they are.\n\n";

    RunResult run = session.run([&](Device& dev) -> Outputs {
      const Tensor a = local_block(c.a, mesh, c.a_spec, dev.id());  // [m/|X|, k/|Y|]
      const Tensor b = local_block(c.b, mesh, c.b_spec, dev.id());  // [k/|X|, n]
      const Tensor a_rows = all_gather(dev, a, {Y}, 1, "A");        // [m/|X|, k]: this half's rows
      const Tensor b_all = all_gather(dev, b, {X}, 0, "B");         // [k, n]
      const Tensor half = matmul(a_rows, b_all);                    // [m/|X|, n]: this half's rows of C
      const std::size_t held = (a_rows.size() + b_all.size() + half.size()) * session.element_bytes();
      return with_work({{"C", half}}, 2.0 * mx * c.k * c.n, held);
    });

    // The search's plan for the same case, run and verified when it moves fewer bytes (every rank).
    const CheaperPlan cheaper = run_cheaper_plan(session.runtime(), mesh, c, session.dtype());

    if (session.runtime().is_root()) {
      auto& checks = session.report().checks;
      // Integers in [-4, 4]: exact while 16 k stays within the type's exact integers (k <= 16 in
      // bfloat16); else the one checker's bound (verify_matmul).
      checks.push_back(verify_matmul(mesh, c_spec, run, "C", c, session.dtype()));
      checks.back().name = "C, its rows split over " + X;
      checks.push_back(planner_agrees(c.plan, session.report().collectives));
      checks.insert(checks.end(), cheaper.checks.begin(), cheaper.checks.end());

      out << "3. Communication: the two AllGathers of Case 1B, A's on blocks " << mesh.axis_size(X)
          << " times smaller.\n" << collectives_table(session.report().collectives) << "\n";
      const Plan case_1b = case_plan(mesh, c, "_,Y", "X,_");
      out << "4. Work. The devices at each " << X << " position multiply their " << mx << " rows of A by all of B: "
          << c_spec.notation("C", {"I", "J"}) << ".\n"
          << work_text(mesh, run, c.plan.unsharded_flops(), (c.m * c.k + c.k * c.n + c.m * c.n) * session.element_bytes())
          << "   Devices multiplying the very same blocks: " << same_work_groups(mesh, c.plan) << "\n"
          << "   Case 1B (lesson 05) on the same shapes: " << cost_text(case_1b) << ".\n   Here:"
          << std::string(35, ' ') << cost_text(c.plan) << ".\n"
          << "   Splitting A's rows over " << X << " removes the duplication along " << X
          << " (each " << X << " slice does its own rows)\n   and shrinks A's gather; the " << mesh.axis_size(Y)
          << " devices along " << Y << " still repeat one another.\n"
          << "   C as each device ends (rows:cols):\n"
          << blocks_picture(mesh, c_spec, {c.m, c.n}) << "\n";
      out << "5. Verdict against A B on one device:\n";
      for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
      out << "   The planner's article rules derive the same from the specs alone (shardlab matmul --plan article\n"
          << "   --mesh " << mesh.text() << " --a-spec " << c.a_spec.text() << " --b-spec " << c.b_spec.text()
          << "):\n   " << plan_summary(c.plan) << "\n"
          << cheaper.text;
    }
    out << "\nTakeaway: an outer dim can be split for free: its rows of C need only its rows of A. With A a\n"
           "          batch and B the weights, that is data parallelism.\n"
           "Next:     build/bin/07_full_sharding\n"
           "          split B's outer dim over Y too, and no device repeats another.\n"
           "Exercise: build/bin/shardlab exercise --lesson 06\n";
    return session.finish();
  });
}
