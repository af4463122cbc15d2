// The mpi backend against the sim backend: every collective over every kind of group gives the same
// blocks and the same ledger bytes on processes as on threads, with our ring algorithms and with
// MPICH's own. Misuse (wrong world size, collectives that do not match, a device that fails or
// skips a collective) ends as the same Error on every rank, never as a hang.
#include <doctest/doctest.h>

#include <chrono>

#include "collectives/collectives.hpp"
#include "collectives/mpi.hpp"
#include "collectives/predict.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"

using namespace shardlab;

namespace {

int world() { return mpi::world_size(); }

// One device per rank: a 1-D mesh and, where the world allows, 2-D and 3-D ones.
std::vector<Mesh> meshes() {
  const int n = world();
  std::vector<Mesh> out = {Mesh({"X"}, {n})};
  if (n % 2 == 0) out.push_back(Mesh({"X", "Y"}, {2, n / 2}));
  if (n == 8) out.push_back(Mesh({"X", "Y", "Z"}, {2, 2, 2}));
  return out;
}

// Groups to run over: each axis; all axes in mesh order; all reversed (group order differs from
// the communicator's). On the 3-D mesh fewer, to keep the step count low at 8 ranks.
std::vector<std::vector<std::string>> axis_sets(const Mesh& m) {
  const auto& names = m.names();
  if (m.rank() == 3) return {{"Y"}, {"X", "Z"}, {"Z", "Y", "X"}};
  std::vector<std::vector<std::string>> out;
  for (const auto& a : names) out.push_back({a});
  if (m.rank() > 1) {
    out.push_back(names);
    out.push_back(std::vector<std::string>(names.rbegin(), names.rend()));
  }
  return out;
}

// Every collective, both dims, on small integer inputs that depend on the device.
Outputs every_collective(Device& dev) {
  Outputs out;
  std::uint64_t k = 0;
  for (const auto& axes : axis_sets(dev.mesh())) {
    const std::size_t n = dev.mesh().axes_size(axes);
    const std::string on = " " + axes_text(axes);
    const Tensor x = random_integers({2 * n, 3 * n}, 1000 * dev.id() + k++, -9, 9);
    const Tensor odd = random_integers({2 * n + 1}, 1000 * dev.id() + k++, -9, 9);  // unequal ring chunks
    out["ag0" + on] = all_gather(dev, x, axes, 0, "A");
    out["ag1" + on] = all_gather(dev, x, axes, 1, "A");
    out["rs0" + on] = reduce_scatter(dev, x, axes, 0, "B");
    out["rs1" + on] = reduce_scatter(dev, x, axes, 1, "B");
    out["ar" + on] = all_reduce(dev, x, axes, "C");
    out["ar odd" + on] = all_reduce(dev, odd, axes, "D");
    out["armax" + on] = all_reduce_max(dev, x, axes, "F");
    out["armax odd" + on] = all_reduce_max(dev, odd, axes, "G");
    out["a2a01" + on] = all_to_all(dev, x, axes, 0, 1, "E");
    out["a2a10" + on] = all_to_all(dev, x, axes, 1, 0, "E");
  }
  return out;
}

void check_same_outputs(const RunResult& want, const RunResult& got) {
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (std::size_t d = 0; d < want.outputs.size(); ++d) {
    REQUIRE(got.outputs[d].size() == want.outputs[d].size());
    for (const auto& [name, t] : want.outputs[d]) {
      CAPTURE(d);
      CAPTURE(name);
      REQUIRE(got.outputs[d].count(name) == 1);
      CHECK(got.outputs[d].at(name) == t);  // bit for bit: integers, and the same ring order
    }
  }
}

// Runs `program` and returns the Error it must end with.
Error failure(Runtime& rt, const Mesh& mesh, const SpmdProgram& program) {
  try {
    rt.run(mesh, program);
  } catch (const Error& e) {
    return e;
  }
  FAIL("the run did not fail");
  return Error(ErrorKind::io, "unreachable");
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// After a failed run the backend drops its communicators; the next run must work.
void check_recovers(Runtime& rt) {
  const Mesh m({"X"}, {world()});
  const RunResult r = rt.run(m, [](Device& dev) -> Outputs {
    return {{"sum", all_reduce(dev, Tensor{double(dev.id())}, {"X"}, "ok")}};
  });
  if (rt.is_root())
    for (const auto& o : r.outputs) CHECK(o.at("sum")(0) == world() * (world() - 1) / 2.0);
}

}  // namespace

TEST_SUITE("mpi backend") {
  TEST_CASE("ring collectives on processes give the sim backend's blocks and ledger bytes") {
    Runtime sim(Backend::sim), rt(Backend::mpi);
    for (const Mesh& mesh : meshes()) {
      CAPTURE(mesh.text());
      const RunResult want = sim.run(mesh, every_collective);
      const RunResult got = rt.run(mesh, every_collective);
      if (!rt.is_root()) {
        CHECK(got.outputs.empty());
        continue;
      }
      check_same_outputs(want, got);
      REQUIRE(got.ledger.size() == want.ledger.size());
      for (std::size_t i = 0; i < want.ledger.size(); ++i) {
        const LedgerRow &w = want.ledger[i], &g = got.ledger[i];
        CAPTURE(i);
        CHECK(g.device == w.device);
        CHECK(g.call == w.call);
        CHECK(g.op == w.op);
        CHECK(g.axes == w.axes);
        CHECK(g.tensor == w.tensor);
        CHECK(g.algorithm == w.algorithm);
        CHECK(g.group_size == w.group_size);
        CHECK(g.input_bytes == w.input_bytes);
        CHECK(g.output_bytes == w.output_bytes);
        CHECK(g.messages == w.messages);
        CHECK(g.bytes_sent == w.bytes_sent);
        CHECK(g.bytes_received == w.bytes_received);
        CHECK_FALSE(g.modeled);
      }
    }
  }

  TEST_CASE("native collectives (MPICH's own) give the same blocks in every element type; their rows are modeled") {
    // Every type: MPICH has no bfloat16, whose sum and max are user ops (collectives/mpi_transport.cpp);
    // the integers in [-9, 9] sum exactly in each type, so the blocks agree bit for bit.
    for (const DType type : {DType::float64, DType::float32, DType::bfloat16}) {
      CAPTURE(dtype_name(type));
      Runtime sim(Backend::sim, false, type), rt(Backend::mpi, true, type);
      for (const Mesh& mesh : meshes()) {
        CAPTURE(mesh.text());
        const RunResult want = sim.run(mesh, every_collective);
        const RunResult got = rt.run(mesh, every_collective);
        if (!rt.is_root()) continue;
        check_same_outputs(want, got);
        REQUIRE(got.ledger.size() == want.ledger.size());
        for (std::size_t i = 0; i < want.ledger.size(); ++i) {
          const LedgerRow& g = got.ledger[i];
          CAPTURE(i);
          CHECK(g.op == want.ledger[i].op);
          CHECK(g.algorithm == "native");
          CHECK(g.modeled);
          CHECK(g.bytes_sent == predicted_bytes_sent(g.op, g.group_size, g.input_bytes, element_bytes(type)));
        }
      }
    }
  }

  TEST_CASE("a world size different from the mesh is one sentence on every rank") {
    Runtime rt(Backend::mpi);
    const Mesh mesh({"X"}, {world() + 1});
    const std::string want = "mesh X=" + std::to_string(world() + 1) + " needs " + std::to_string(world() + 1) +
                             " processes, mpiexec started " + std::to_string(world());
    const Error e = failure(rt, mesh, [](Device&) { return Outputs{}; });
    CHECK(e.kind() == ErrorKind::world_size);
    CHECK(std::string(e.what()).rfind(want, 0) == 0);
    CHECK(has(e.what(), "mpiexec -n " + std::to_string(world() + 1)));
    CHECK_THROWS_AS(rt.check_mesh(mesh), Error);
    CHECK_NOTHROW(rt.check_mesh(Mesh({"X"}, {world()})));
  }

  TEST_CASE("devices of one group calling different collectives get an error naming both") {
    if (world() < 2) return;
    Runtime rt(Backend::mpi);
    const Mesh mesh({"X"}, {world()});
    const Error e = failure(rt, mesh, [](Device& dev) -> Outputs {
      const Tensor x = xt::ones<double>({std::size_t(4 * dev.mesh().devices())});
      if (dev.id() == 0) return {{"y", all_gather(dev, x, {"X"}, 0, "A")}};
      return {{"y", all_reduce(dev, x, {"X"}, "A")}};
    });
    CHECK(e.kind() == ErrorKind::mismatch);
    CHECK(has(e.what(), "do not match"));
    CHECK(has(e.what(), "all_gather over X of A"));
    CHECK(has(e.what(), "all_reduce over X of A"));
    check_recovers(rt);
  }

  TEST_CASE("collectives over different axes end in an error, not a hang") {
    Runtime rt(Backend::mpi);
    if (world() < 2) return;
    // X=2,Y=n/2: mesh row 0 reduces over Y, the other row over X. Else X=1,Y=n: device 0 reduces
    // over Y, the others over X (groups of one, done at once).
    const bool two_rows = world() % 2 == 0 && world() > 2;
    const Mesh mesh = two_rows ? Mesh({"X", "Y"}, {2, world() / 2}) : Mesh({"X", "Y"}, {1, world()});
    const auto start = std::chrono::steady_clock::now();
    const Error e = failure(rt, mesh, [](Device& dev) -> Outputs {
      const bool over_y = dev.mesh().axis_size("X") == 1 ? dev.id() == 0 : dev.coord("X") == 0;
      const Tensor x = xt::ones<double>({std::size_t{8}});
      return {{"y", all_reduce(dev, x, {over_y ? "Y" : "X"}, "A")}};
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(e.kind() == ErrorKind::mismatch);
    CHECK((has(e.what(), "finished its program without taking part") || has(e.what(), "every device is stuck")));
    MESSAGE("detected in " << seconds << " s: " << std::string(e.what()));
    check_recovers(rt);
  }

  TEST_CASE("a device whose program throws stops every other device with its error") {
    Runtime rt(Backend::mpi);
    const Mesh mesh({"X"}, {world()});
    const int last = world() - 1;
    const Error e = failure(rt, mesh, [last](Device& dev) -> Outputs {
      if (dev.id() == last) throw std::runtime_error("boom");
      return {{"y", all_reduce(dev, Tensor(xt::ones<double>({std::size_t{8}})), {"X"}, "A")}};
    });
    CHECK(e.kind() == ErrorKind::device);
    CHECK(std::string(e.what()) == "device " + std::to_string(last) + " failed: boom");
    check_recovers(rt);
  }

  TEST_CASE("a device that skips a collective is named, not waited for") {
    if (world() < 2) return;
    Runtime rt(Backend::mpi);
    const Mesh mesh({"X"}, {world()});
    const Error e = failure(rt, mesh, [](Device& dev) -> Outputs {
      if (dev.id() == 1) return {};
      return {{"y", all_reduce(dev, Tensor(xt::ones<double>({std::size_t{8}})), {"X"}, "A")}};
    });
    CHECK(e.kind() == ErrorKind::mismatch);
    CHECK(has(e.what(), "for device 1, which finished its program without taking part"));
    check_recovers(rt);
  }

  TEST_CASE("a failure before MPICH's own collective does not hang the others inside it") {
    Runtime rt(Backend::mpi, true);
    const Mesh mesh({"X"}, {world()});
    const Error e = failure(rt, mesh, [](Device& dev) -> Outputs {
      if (dev.id() == 0) throw Error(ErrorKind::unsupported, "device 0 gives up");
      return {{"y", all_reduce(dev, Tensor(xt::ones<double>({std::size_t{8}})), {"X"}, "A")}};
    });
    CHECK(e.kind() == ErrorKind::unsupported);
    CHECK(std::string(e.what()) == "device 0 gives up");
    check_recovers(rt);
  }

  TEST_CASE("exit statuses are agreed: the largest over ranks") {
    Runtime rt(Backend::mpi);
    CHECK(rt.agree(0) == 0);
    CHECK(rt.agree(rt.is_root() ? 0 : 1) == (world() > 1 ? 1 : 0));
    CHECK(rt.agree(rt.is_root() ? 2 : 0) == 2);
  }

  // The transport sends a ring step of more than 1 MiB as several segments (mpi_transport.cpp).
  // Every collective with steps of 1.5 MiB + 3 elements (two segments, the last short) in each
  // element type, checked against values from a formula (small integers: every sum is exact in all
  // three types) and against the sim run bit for bit; ledger bytes = the elements moved times the
  // element size. At 8 ranks over the axes reversed (Z, Y, X): a group whose order is not the
  // communicator's. A segment put at an offset counted in elements instead of bytes, or a piece
  // size off by one, changes the data here; no smaller test reaches that path.
  TEST_CASE("steps over 1 MiB (segmented) in every element type: the formula's values, sim's bytes (8 ranks: the ring's)") {
    const int n = world();
    const Mesh mesh = n == 8 ? Mesh({"X", "Y", "Z"}, {2, 2, 2}) : Mesh({"X"}, {n});
    // At 8 ranks a group of 4 over two of the three axes, Z major: a communicator order that is
    // not the world's (each group's member at position p is not rank p), in 3 ring steps, not 7.
    const std::vector<std::string> axes = n == 8 ? std::vector<std::string>{"Z", "Y"} : std::vector<std::string>{"X"};
    const int g = n == 8 ? 4 : n;  // group size
    const std::vector<DType> types = n == 8 ? std::vector<DType>{DType::float32}
                                            : std::vector<DType>{DType::float64, DType::float32, DType::bfloat16};
    auto v = [](int d, std::size_t i) { return double(int((i * 7 + std::size_t(d) * 3 + i / 1000) % 9) - 4); };
    for (DType t : types) {
      CAPTURE(dtype_name(t));
      const std::size_t eb = element_bytes(t), chunk = (std::size_t{3} << 19) / eb + 3, len = chunk * std::size_t(g);
      const SpmdProgram program = [&](Device& dev) -> Outputs {
        Tensor x = xt::empty<double>(Shape{len}), first = xt::empty<double>(Shape{chunk});
        for (std::size_t i = 0; i < len; ++i) x(i) = v(dev.id(), i);
        for (std::size_t i = 0; i < chunk; ++i) first(i) = v(dev.id(), i);
        // At 8 ranks (on 2 cores every step costs 10-50 ms) the two ring halves an all_reduce is made of.
        if (n == 8) return {{"rs", reduce_scatter(dev, x, axes, 0, "big")}, {"ag", all_gather(dev, first, axes, 0, "big")}};
        return {{"ar", all_reduce(dev, x, axes, "big")},
                {"rs", reduce_scatter(dev, x, axes, 0, "big")},
                {"ag", all_gather(dev, first, axes, 0, "big")},
                {"aa", all_to_all(dev, x, axes, 0, 0, "big")}};
      };
      // Only rank 0 compares. At 8 ranks the bytes come from the ring's formula, not a sim run: 8
      // sim devices on rank 0 while 7 ranks busy-poll the 2 cores took 3 of this case's 7 s.
      Runtime sim(Backend::sim, false, t), rt(Backend::mpi, false, t);
      const RunResult got = rt.run(mesh, program);
      if (!rt.is_root()) continue;
      if (n == 8) {
        REQUIRE(got.ledger.size() == 2 * std::size_t(n));  // rs and ag on every device
        for (const LedgerRow& row : got.ledger) {
          CAPTURE(row.op);
          CHECK(row.bytes_sent == std::size_t(g - 1) * chunk * eb);  // g - 1 steps of one chunk
          CHECK(row.bytes_received == row.bytes_sent);
        }
      }
      const RunResult want = n == 8 ? RunResult{} : sim.run(mesh, program);
      if (n != 8) check_same_outputs(want, got);
      // group position of each device along `axes` (Z major): the order its blocks come in. On
      // 2x2x2, device d = 4x + 2y + z sits at 2z + y in the group of the devices with its x; on a
      // line, at d.
      auto pos = [&](int d) { return n == 8 ? 2 * (d % 2) + d / 2 % 2 : d; };
      auto member = [&](int d, int p) { return n == 8 ? d / 4 * 4 + p % 2 * 2 + p / 2 : p; };  // at p, in d's group
      bool ok = true;
      for (int d = 0; d < n && ok; ++d) {
        const Outputs& o = got.outputs[std::size_t(d)];
        const double *ar = n != 8 ? o.at("ar").data() : nullptr, *aa = n != 8 ? o.at("aa").data() : nullptr;
        const double *rs = o.at("rs").data(), *ag = o.at("ag").data();
        for (std::size_t i = 0; i < len && ok && n != 8; ++i) {
          double sum = 0;
          for (int e = 0; e < n; ++e) sum += v(e, i);
          ok &= ar[i] == sum;
        }
        for (std::size_t i = 0; i < chunk && ok; ++i) {
          double sum = 0;
          for (int p = 0; p < g; ++p) sum += v(member(d, p), std::size_t(pos(d)) * chunk + i);
          ok &= rs[i] == sum;
        }
        for (int p = 0; p < g && ok; ++p)  // block p of the gather is the first chunk of the member at p
          for (std::size_t i = 0; i < chunk && ok; ++i) ok &= ag[std::size_t(p) * chunk + i] == v(member(d, p), i);
        for (int e = 0; e < n && ok && n != 8; ++e)  // block pos(e) of the all_to_all is e's slice pos(d)
          for (std::size_t i = 0; i < chunk && ok; ++i)
            ok &= aa[std::size_t(pos(e)) * chunk + i] == v(e, std::size_t(pos(d)) * chunk + i);
        CAPTURE(d);
        CHECK(ok);
      }
      if (n != 8) REQUIRE(got.ledger.size() == want.ledger.size());
      for (std::size_t i = 0; i < got.ledger.size(); ++i) {
        CAPTURE(i);
        if (n != 8) CHECK(got.ledger[i].bytes_sent == want.ledger[i].bytes_sent);
        CHECK(got.ledger[i].bytes_sent % eb == 0);
        CHECK(got.ledger[i].bytes_sent >= chunk * eb);  // at least one whole step of over 1 MiB
      }
    }
  }
}
