// Lesson 03 - a dot product, and a matmul, are sums of smaller ones (article 001).
//
// One idea: a dot product of length 4 is the sum of two dot products of length 2, so two devices
// can each do half and add their two numbers (AllReduce). A matmul C = A B is nothing but the
// table of dot products of every row of A with every column of B; written with named dims (article
// 000) it is a broadcast multiply A[i,k] * B[k,j] -> P[i,k,j] followed by a sum over the shared
// name k. Sharding a matmul (lessons 04-07) is choosing which of those sums each device does.
//
// Run:    build/bin/03_dot_product_and_matmul [--mesh X=2,Y=4] [--shape 4,16,4] [--backend sim|mpi] [--json]
//         build/bin/03_dot_product_and_matmul --vocab   (50257 vocabulary rows over 8 devices)
//         mpiexec -n 8 build/bin/03_dot_product_and_matmul --backend mpi
// Prints: the article's vectors split over the first mesh axis with each device's partial dot
//         product and the AllReduce that adds them; the article's 2x4 by 4x2 matmul as a table of
//         dot products; the same by broadcast-and-sum; the m x k by k x n matmul of the next
//         lessons; the verdicts.
#include <iomanip>
#include <sstream>

#include <xtensor/xview.hpp>

#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/named.hpp"
#include "harness/cli/cli.hpp"
#include "harness/check/session.hpp"
#include "harness/models/vocab_split.hpp"

using namespace shardlab;

namespace {
std::string matrix_text(const Tensor& t, const std::string& indent) {
  std::ostringstream out;
  for (std::size_t i = 0; i < t.shape()[0]; ++i) {
    out << indent << "[";
    for (std::size_t j = 0; j < t.shape()[1]; ++j) out << (j ? " " : "") << std::setw(3) << t(i, j);
    out << " ]\n";
  }
  return out.str();
}

// `text` as lines of at most `width` columns, each starting with `indent`.
std::string paragraph(const std::string& text, const std::string& indent, std::size_t width = 100) {
  std::istringstream words(text);
  std::string out, line, word;
  while (words >> word) {
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return line.empty() ? out : out + indent + line + "\n";
}

// Who does the same work: a and b are split over X only, so every other axis with more than one
// device holds copies. Said only when it is so; on a line, each device holds its own run.
std::string who_repeats(const Mesh& mesh, const std::string& X) {
  std::vector<std::string> others;
  for (const auto& name : mesh.names())
    if (name != X && mesh.axis_size(name) > 1) others.push_back(name);
  const int nx = mesh.axis_size(X);
  std::string along;
  for (std::size_t i = 0; i < others.size(); ++i)
    along += (i == 0 ? "" : i + 1 == others.size() ? " or " : ", ") + others[i];
  std::string text;
  if (nx == 1)
    text = "Mesh axis " + X + " has size 1, so a run is all 4 terms and the AllReduce over " + X +
           " has nothing to add: nothing travels. " +
           (others.empty() ? "The one device does all the work."
                           : (mesh.devices() == 2 ? std::string("Both devices") : "All " + std::to_string(mesh.devices()) +
                                                                                     " devices") +
                                 " hold the whole vectors and repeat the same work, since nothing splits a or b " +
                                 "over " + along + ".");
  else
    text = (others.empty() ? "Each device holds a different run, so no work is repeated."
                           : "Devices with the same " + X + " coordinate hold the same run and repeat the work, " +
                                 "since nothing splits a or b over " + along + ".") +
           " Only these numbers travel, not the vectors: AllReduce over " + X + " adds them.";
  return paragraph(text, "   ");
}
}  // namespace

// --vocab: dims that do not divide, on a real vocabulary; harness/models/vocab_split.hpp.
int vocab_section(const CommonOptions& common) {
  Session session("03_dot_product_and_matmul --vocab", common);
  const VocabSplit v = run_vocab_split(session.runtime(), session.mesh().devices(), 50257, common.seed);
  session.out() << v.text << "   Verdict:\n";
  for (const auto& c : v.checks) session.out() << "   " << c.name << ": " << c.line() << "\n";
  auto& rep = session.report();
  rep.checks = v.checks;
  rep.collectives = v.collectives;
  session.out() << "\nTakeaway: a dim that does not divide splits either way; chunk wastes nothing but shapes differ\n"
                   "          per device, pad keeps one shape for all at the cost of sending and storing zeros.\n"
                   "Try it on a matmul, each way (--uneven chunk or pad):\n"
                   "   build/bin/shardlab matmul --mesh X=8 --a-spec X,_ --b-spec _,_ --shape 50257,64,32 --uneven pad\n";
  return session.finish();
}

int main(int argc, char** argv) {
  Cli cli("03_dot_product_and_matmul", "Lesson 03: dot products and matmuls are sums of smaller ones", "X=2,Y=4");
  std::string shape = "4,16,4";
  cli.option("--shape", shape, "m,k,n of the last part: A is m x k, B is k x n");
  bool vocab = false;
  cli.flag("--vocab", vocab, "only the section on a vocabulary of 50257 rows over the mesh's devices, chunked and padded");
  if (int status = cli.parse(argc, argv); status >= 0) return status;
  if (vocab) return guarded([&] { return vocab_section(cli.common); });

  return guarded([&] {
    Session session("03_dot_product_and_matmul", cli.common);
    const Mesh& mesh = session.mesh();
    const std::string X = mesh.names()[0];
    // The article's numbers: a . b = -3; the 2x4 A and 4x2 B below give C = [[4, -3], [1, -4]].
    const Tensor a = {1, 0, 2, -1}, b = {-1, 2, 0, 2};
    const Tensor A = {{1, 0, 2, -1}, {2, 1, 0, -2}}, B = {{0, -1}, {1, 2}, {2, 0}, {0, 2}};
    const Tensor article_dot = -3.0, article_C = {{4, -3}, {1, -4}};
    const Spec vec_spec = Spec::parse(X);  // the vectors split over the first mesh axis
    vec_spec.validate(mesh, {4}, "a");
    const Shape mkn = parse_shape(shape, "--shape");
    if (mkn.size() != 3)
      throw Error(ErrorKind::parse, "--shape has " + std::to_string(mkn.size()) + " sizes; expected m,k,n like 4,16,4");
    const Einsum dot_eq = Einsum::parse("i,i->"), mm_eq = Einsum::parse("ik,kj->ij");
    const std::size_t per = 4 / static_cast<std::size_t>(mesh.axis_size(X));

    auto& out = session.out();
    out << "Mesh " << mesh.text() << " (" << mesh.devices() << (mesh.devices() == 1 ? " device" : " devices")
        << "):\n" << mesh.picture() << "\n"
        << "1. A dot product, split. a = [1, 0, 2, -1], b = [-1, 2, 0, 2]:\n"
        << paragraph("a . b = (1)(-1) + (0)(2) + (2)(0) + (-1)(2) = -3." +
                         (per < 4 ? " Group the terms in runs of " + std::to_string(per) +
                                        " and each run is a shorter dot product."
                                  : std::string()) +
                         " Split a and b over mesh axis " + X + " (" + vec_spec.notation("a", {"I"}) +
                         "): each device takes one run.",
                     "   ");

    RunResult run = session.run([&](Device& dev) -> Outputs {
      const Tensor mine_a = local_block(a, mesh, vec_spec, dev.id()), mine_b = local_block(b, mesh, vec_spec, dev.id());
      const Tensor partial = contract(dot_eq, mine_a, mine_b);  // a scalar: this run's terms only
      return {{"partial", partial}, {"dot", all_reduce(dev, partial, {X}, "dot")}};
    });

    if (session.runtime().is_root()) {
      auto& checks = session.report().checks;
      out << "   Each device's run of a and b, and its partial dot product:\n"
          << mesh.picture([&](int d) {
               const Block blk = block_of(mesh, vec_spec, {4}, d);
               std::ostringstream l;
               l << "[" << blk.start[0] << ":" << blk.stop[0] << "] -> " << run.outputs[d].at("partial")();
               return l.str();
             })
          << who_repeats(mesh, X) << collectives_table(session.report().collectives);
      checks.push_back(verify_output(mesh, Spec(), run, "dot", article_dot));
      checks.back().name = "a . b split over " + X + " (the article's -3)";
      out << "   " << (mesh.devices() == 1 ? "The device" : "Every device") << " now holds " << run.outputs[0].at("dot")()
          << ".\n\n";

      // 2. The matmul as a table of dot products, row i of A with column j of B.
      out << "2. A matmul is a table of dot products. A is 2x4, B is 4x2:\n" << "   A =\n" << matrix_text(A, "     ")
          << "   B =\n" << matrix_text(B, "     ") << "   C[i, j] = (row i of A) . (column j of B):\n";
      Tensor table = xt::zeros<double>(Shape{2, 2});
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 2; ++j) {
          const Tensor row = xt::view(A, i, xt::all()), col = xt::view(B, xt::all(), j);
          table(i, j) = contract(dot_eq, row, col)();
          out << "     C[" << i << ", " << j << "] = (" << row(0) << ")(" << col(0) << ") + (" << row(1) << ")("
              << col(1) << ") + (" << row(2) << ")(" << col(2) << ") + (" << row(3) << ")(" << col(3)
              << ") = " << table(i, j) << "\n";
        }
      out << "   C[0, 1] is the dot product of part 1. Two rows of A and two columns of B give 2x2 dot products,\n"
             "   and each needs rows and columns of the same length: (n x d)(d x m) = n x m.\n";
      checks.push_back(compare("C as a table of dot products (the article's C)", table, article_C));

      // 3. The same by names: broadcast multiply, then sum the shared name.
      const NamedTensor p = named_mul({{"i", "k"}, A}, {{"k", "j"}, B});  // P[i,k,j] = A[i,k] B[k,j]
      const NamedTensor c = named_sum(p, "k");
      out << "\n3. With named dims (article 000): A[i,k] * B[k,j] broadcasts by name to P[i,k,j], every product\n"
          << "   (" << p.data.size() << " of them, shape " << shape_text(shape_of(p.data))
          << "); summing the shared name k leaves C[i,j]:\n" << matrix_text(c.data, "     ");
      checks.push_back(compare("C by broadcast and sum", c.data, article_C));
      checks.push_back(compare("C by BLAS", matmul(A, B), article_C));

      // 4. The shapes of lessons 04-07.
      const std::size_t m = mkn[0], k = mkn[1], n = mkn[2];
      const Tensor A2 = random_integers({m, k}, cli.common.seed, -4, 4), B2 = random_integers({k, n}, cli.common.seed + 1, -4, 4);
      const Tensor by_names = reference_einsum(mm_eq, A2, B2), by_blas = matmul(A2, B2);
      out << "\n4. The next lessons multiply A (" << m << "x" << k << ") by B (" << k << "x" << n << "): " << m * n
          << " dot products of length " << k << ",\n   " << contraction_flops(mm_eq, {m, k}, {k, n})
          << " FLOPs (a multiply and an add per term).\n";
      if (m * n <= 64) out << "   C =\n" << matrix_text(by_blas, "     ");
      checks.push_back(compare("C " + std::to_string(m) + "x" + std::to_string(n) + ": BLAS against broadcast and sum",
                               by_blas, by_names));

      out << "\n5. Verdict:\n";
      for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
    }
    out << "\nTakeaway: a dot product splits into partial dot products that only need adding; a matmul is a\n"
           "          table of dot products, a broadcast multiply summed over the shared dim.\n"
           "Next:     build/bin/04_inner_axes_match\n"
           "          split that shared dim over a mesh axis (Case 1A).\n"
           "Exercise: build/bin/shardlab exercise --lesson 03\n";
    return session.finish();
  });
}
