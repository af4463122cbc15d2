#include "harness/check/case_file.hpp"

#include <cmath>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <toml++/toml.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(ErrorKind::parse, path_ + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + what);
  }
  static int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

  // Every key of `t` must be one of `known`.
  void only(const toml::table& t, const std::set<std::string>& known, const std::string& where) const {
    for (const auto& [k, v] : t)
      if (!known.count(std::string(k.str())))
        fail(line_of(v), where + " has no key '" + std::string(k.str()) + "'; it takes " +
                             join(std::vector<std::string>(known.begin(), known.end()), ", "));
  }
  const toml::node& need(const toml::table& t, const std::string& key, const std::string& where) const {
    const toml::node* n = t.get(key);
    if (!n) fail(line_of(t), where + " needs " + key);
    return *n;
  }
  std::string text(const toml::node& n, const std::string& what) const {
    if (!n.is_string()) fail(line_of(n), what + " must be a string");
    return std::string(*n.value<std::string>());
  }
  std::int64_t integer(const toml::node& n, const std::string& what, std::int64_t lo) const {
    if (!n.is_integer()) fail(line_of(n), what + " must be an integer");
    const std::int64_t v = *n.value<std::int64_t>();
    if (v < lo) fail(line_of(n), what + " is " + std::to_string(v) + "; it must be at least " + std::to_string(lo));
    return v;
  }
  const toml::table& table(const toml::node& n, const std::string& what) const {
    if (!n.is_table()) fail(line_of(n), what + " must be a table, like { a = 1 }");
    return *n.as_table();
  }
  const toml::array& array(const toml::node& n, const std::string& what) const {
    if (!n.is_array()) fail(line_of(n), what + " must be an array, like [\"a\", \"b\"]");
    return *n.as_array();
  }
  std::vector<std::string> strings(const toml::node& n, const std::string& what) const {
    std::vector<std::string> out;
    for (const auto& e : array(n, what)) out.push_back(text(e, what + "'s entries"));
    return out;
  }

 private:
  std::string path_;
};

}  // namespace

namespace {

std::string case_shape_words(const std::vector<std::size_t>& shape) {
  std::string out;
  for (std::size_t d : shape) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "(" + out + (shape.size() == 1 ? ",)" : ")");
}

// Each program input with an array in the files: its rank must be its dims', and each dim's size
// the case's, or, where the case gives none, the same in every array that has that dim.
void sizes_from_files(TensorProgram& p, const NamedArrays& files) {
  std::map<char, std::string> set_by;  // dim -> the array that gave its size
  for (const auto& [name, letters] : p.inputs) {
    const auto it = files.arrays.find(name);
    if (it == files.arrays.end()) continue;
    const auto shape = std::vector<std::size_t>(it->second.data.shape().begin(), it->second.data.shape().end());
    if (shape.size() != letters.size())
      throw Error(ErrorKind::rank_mismatch, files.where(name) + " has shape " + case_shape_words(shape) + ", " +
                                                std::to_string(shape.size()) + " dims; the case's input " + name +
                                                " has " + std::to_string(letters.size()) + " (" + letters + ")");
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const char l = letters[d];
      const auto size = p.sizes.find(l);
      if (size == p.sizes.end()) {
        p.sizes[l] = shape[d];
        set_by[l] = files.where(name);
      } else if (size->second != shape[d]) {
        throw Error(ErrorKind::rank_mismatch,
                    files.where(name) + " has shape " + case_shape_words(shape) + ": dim " + std::string(1, l) + " of " + name +
                        " (" + letters + ") is " + std::to_string(shape[d]) + ", but " +
                        (set_by.count(l) ? set_by[l] + " gives " : "the case's dims give ") + std::string(1, l) + " = " +
                        std::to_string(size->second) + (set_by.count(l) ? "" : " (leave it out of dims to take it from the files)"));
      }
    }
  }
}

}  // namespace

namespace {

// Name, mesh, element type, seed, the weak-check allowance and where the inputs come from.
void read_run_settings(const Reader& r, const toml::table& root, const std::string& path,
                       const std::string& inputs_path, CaseFile& c, TensorProgram& p) {
  const toml::node& name = r.need(root, "name", "a case file");
  p.name = r.text(name, "name");
  // Printed in reports and terminals: letters, digits and a little punctuation only.
  if (p.name.empty() || p.name.size() > 100 ||
      p.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != std::string::npos)
    r.fail(Reader::line_of(name), "name is \"" + p.name + "\"; give a plain name (letters, digits, _ - .), like \"gspmd_ffn\"");
  const toml::node& mesh = r.need(root, "mesh", "a case file");
  c.mesh = r.text(mesh, "mesh");
  try {
    Mesh::parse(c.mesh);
  } catch (const Error& e) {
    r.fail(Reader::line_of(mesh), e.what());
  }
  if (const auto* n = root.get("dtype")) {
    c.dtype = r.text(*n, "dtype");
    try {
      parse_dtype(c.dtype);
    } catch (const Error& e) {
      r.fail(Reader::line_of(*n), e.what());
    }
  }
  if (const auto* n = root.get("allow_weak")) {
    c.allow_weak = r.text(*n, "allow_weak");
    if (c.allow_weak.find_first_not_of(" \t") == std::string::npos)
      r.fail(Reader::line_of(*n), "allow_weak must say why a weak check is acceptable here, e.g. \"bfloat16 gradients "
                                  "through two layer norms\"");
  }
  if (const auto* n = root.get("inputs_from")) {
    c.inputs_from = r.text(*n, "inputs_from");
    if (c.inputs_from.empty()) r.fail(Reader::line_of(*n), "inputs_from is empty; give a .npz file or a folder of NAME.npy");
    // Relative to the case file, as a user keeps a layer's case beside its weights.
    const std::filesystem::path from(c.inputs_from);
    if (from.is_relative()) c.inputs_from = (std::filesystem::path(path).parent_path() / from).string();
  }
  if (!inputs_path.empty()) c.inputs_from = inputs_path;
  if (!c.inputs_from.empty()) c.input_files = load_arrays(c.inputs_from);
  if (const auto* n = root.get("seed")) c.seed = static_cast<std::uint64_t>(r.integer(*n, "seed", 0));
}

// How the case is planned and run: plan, uneven, layouts, plan_only, backward, keep_gathered.
void read_plan_settings(const Reader& r, const toml::table& root, CaseFile& c) {
  if (const auto* n = root.get("plan")) {
    c.plan = r.text(*n, "plan");
    if (c.plan != "search" && c.plan != "article")
      r.fail(Reader::line_of(*n), "plan is \"" + c.plan + "\"; use \"search\" (the fewest bytes) or \"article\" (the "
                                  "articles' rules)");
  }
  if (const auto* n = root.get("uneven")) {
    c.uneven = r.text(*n, "uneven");
    if (c.uneven != "chunk" && c.uneven != "pad" && c.uneven != "none")
      r.fail(Reader::line_of(*n), "uneven is \"" + c.uneven + "\"; use \"chunk\" (blocks of ceil(d/n), the last shorter), "
                                  "\"pad\" (blocks of ceil(d/n), zeros after the real rows) or \"none\" (refuse)");
  }
  if (const auto* n = root.get("layouts")) {
    const std::string v = r.text(*n, "layouts");
    if (v != "natural" && v != "auto")
      r.fail(Reader::line_of(*n), "layouts is \"" + v + "\"; use \"natural\" (as propagation gives them, as GSPMD and "
                                  "DTensor do) or \"auto\" (the cheapest for the program)");
    c.auto_layouts = v == "auto";
  }
  if (const auto* n = root.get("plan_only")) {
    if (!n->is_boolean()) r.fail(Reader::line_of(*n), "plan_only must be true or false");
    c.plan_only = *n->value<bool>();
  }
  if (const auto* n = root.get("backward")) {
    if (!n->is_boolean()) r.fail(Reader::line_of(*n), "backward must be true or false");
    c.backward = *n->value<bool>();
    c.backward_line = Reader::line_of(*n);
  }
  if (const auto* n = root.get("keep_gathered")) {
    if (!n->is_boolean()) r.fail(Reader::line_of(*n), "keep_gathered must be true or false");
    c.keep_gathered = *n->value<bool>();
    if (c.keep_gathered && !c.backward)
      r.fail(Reader::line_of(*n), "keep_gathered = true keeps copies for the backward pass; it needs backward = true");
  }
}

// The inputs in the order the file writes them (toml++ keeps a table's keys sorted).
void read_program_inputs(const Reader& r, const toml::table& root, TensorProgram& p) {
  std::vector<std::pair<toml::source_position, std::string>> order;
  for (const auto& [k, v] : r.table(r.need(root, "inputs", "a case file"), "inputs"))
    order.push_back({k.source().begin, std::string(k.str())});
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.first.line != y.first.line ? x.first.line < y.first.line : x.first.column < y.first.column;
  });
  const toml::table& inputs = *root.get("inputs")->as_table();
  for (const auto& [pos, name] : order) p.inputs.push_back({name, r.text(*inputs.get(name), "input " + name)});
  if (p.inputs.empty()) r.fail(Reader::line_of(root), "inputs names no tensor");
}

std::vector<ProgramOp> read_ops(const Reader& r, const toml::table& root) {
  const toml::array& ops = r.array(r.need(root, "ops", "a case file"), "ops");
  if (ops.empty()) r.fail(Reader::line_of(root), "ops is empty");
  std::vector<ProgramOp> out;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string where = "op " + std::to_string(i + 1);
    const toml::table& t = r.table(ops[i], where);
    r.only(t, {"out", "op", "eq", "in", "over", "to", "value", "part"}, where);
    ProgramOp op;
    op.line = Reader::line_of(t);
    op.out = r.text(r.need(t, "out", where), where + "'s out");
    op.name = r.text(r.need(t, "op", where), where + "'s op");
    op.in = r.strings(r.need(t, "in", where), where + "'s in");
    if (const auto* n = t.get("eq")) op.eq = r.text(*n, where + "'s eq");
    if (const auto* n = t.get("over")) op.over = r.text(*n, where + "'s over");
    if (const auto* n = t.get("to")) op.to = r.text(*n, where + "'s to");
    if (const auto* n = t.get("part")) op.part = r.text(*n, where + "'s part");
    if (const auto* n = t.get("value")) {
      if (!n->is_number() || !std::isfinite(*n->value<double>()))
        r.fail(Reader::line_of(*n), where + "'s value must be a finite number");
      op.value = *n->value<double>();
      op.has_value = true;
    }
    out.push_back(op);
  }
  return out;
}

// The program as written: dims, inputs, shard, ops and outputs; sizes the case leaves out come
// from the input files.
void read_program(const Reader& r, const toml::table& root, CaseFile& c, TensorProgram& p) {
  std::map<char, int> dim_lines;
  for (const auto& [k, v] : r.table(r.need(root, "dims", "a case file"), "dims")) {
    const std::string letter(k.str());
    if (letter.size() != 1 || !std::islower(static_cast<unsigned char>(letter[0])))
      r.fail(Reader::line_of(v), "dims names '" + letter + "': a dim is one lower-case letter");
    p.sizes[letter[0]] = static_cast<std::size_t>(r.integer(v, "dim " + letter, 1));
    dim_lines[letter[0]] = Reader::line_of(v);
  }
  read_program_inputs(r, root, p);
  if (const auto* n = root.get("shard"))
    for (const auto& [k, v] : r.table(*n, "shard")) {
      c.shard[std::string(k.str())] = r.text(v, "shard " + std::string(k.str()));
      c.shard_line[std::string(k.str())] = Reader::line_of(v);
    }
  p.ops = read_ops(r, root);
  sizes_from_files(p, c.input_files);
  // A size for a dim nothing uses is a typo or a leftover: say so rather than ignore it.
  std::string used;
  for (const auto& input : p.inputs) used += input.second;
  for (const auto& op : p.ops) used += op.eq + op.to;
  for (const auto& [letter, line] : dim_lines)
    if (used.find(letter) == std::string::npos)
      r.fail(line, "dims gives " + std::string(1, letter) + ", but no input or op uses a dim " + std::string(1, letter));
  p.outputs = r.strings(r.need(root, "outputs", "a case file"), "outputs");
  for (std::size_t i = 0; i < p.outputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (p.outputs[i] == p.outputs[j])
        r.fail(Reader::line_of(*root.get("outputs")), "outputs names " + p.outputs[i] + " twice");
}

// [measured] (a profile's communication shares) and [expect] (what the run must show).
void read_measured_and_expect(const Reader& r, const toml::table& root, CaseFile& c) {
  if (const auto* n = root.get("measured")) {
    const toml::table& m = r.table(*n, "measured");
    r.only(m, {"source", "comm_share"}, "[measured]");
    c.measured_source = r.text(r.need(m, "source", "[measured]"), "measured.source");
    for (const auto& [k, v] : r.table(r.need(m, "comm_share", "[measured]"), "measured.comm_share")) {
      if (!v.is_number() || *v.value<double>() < 0 || *v.value<double>() > 1)
        r.fail(Reader::line_of(v), "measured.comm_share." + std::string(k.str()) + " must be a share from 0 to 1");
      c.measured_share[std::string(k.str())] = *v.value<double>();
    }
  }
  if (const auto* n = root.get("expect")) {
    const toml::table& e = r.table(*n, "expect");
    r.only(e, {"collectives", "max_bytes_per_device", "max_peak_memory_per_device"}, "[expect]");
    if (const auto* v = e.get("collectives")) {
      c.expect.collectives = r.strings(*v, "expect.collectives");
      c.expect.collectives_line = Reader::line_of(*v);
    }
    if (const auto* v = e.get("max_bytes_per_device")) {
      c.expect.max_bytes_per_device = static_cast<std::uint64_t>(r.integer(*v, "max_bytes_per_device", 0));
      c.expect.bytes_line = Reader::line_of(*v);
    }
    if (const auto* v = e.get("max_peak_memory_per_device")) {
      c.expect.max_peak_memory_per_device = static_cast<std::uint64_t>(r.integer(*v, "max_peak_memory_per_device", 0));
      c.expect.memory_line = Reader::line_of(*v);
    }
  }
}

// Each expected collective reads "<op> <tensor> over <axes>": a malformed one is a broken file
// (exit 2), not an expectation the run fails to meet.
void check_expected_collectives(const Reader& r, const CaseFile& c) {
  const Mesh on = Mesh::parse(c.mesh);
  for (const auto& line : c.expect.collectives.value_or(std::vector<std::string>{})) {
    const std::vector<std::string> words = split(line, ' ');
    static const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                 "all_reduce_max", "collective_permute", "send", "recv"};
    std::string why;
    if (words.size() != 4 || words[2] != "over") why = "write it as '<op> <tensor> over <axes>', like 'all_gather h over Y'";
    else if (std::find(ops.begin(), ops.end(), words[0]) == ops.end()) why = "'" + words[0] + "' is not a collective (" + join(ops, ", ") + ")";
    else  // (the tensor may be one the backward pass derives, so only its mesh axes are checked here)
      for (std::string axis : split(words[3], ',')) {
        axis.erase(std::remove(axis.begin(), axis.end(), '('), axis.end());
        axis.erase(std::remove(axis.begin(), axis.end(), ')'), axis.end());
        if (!on.has_axis(axis)) why = "mesh " + on.text() + " has no axis " + axis;
      }
    if (!why.empty()) r.fail(c.expect.collectives_line, "expect.collectives has '" + line + "': " + why);
  }
}

}  // namespace

CaseFile parse_case_file(const std::string& source, const std::string& path, const std::string& inputs_path) {
  const Reader r(path);
  toml::table root;
  try {
    root = toml::parse(source, path);
  } catch (const toml::parse_error& e) {
    r.fail(static_cast<int>(e.source().begin.line), "not TOML: " + std::string(e.description()));
  }
  r.only(root,
         {"name", "mesh", "dtype", "seed", "dims", "inputs", "shard", "ops", "outputs", "backward", "expect", "plan",
          "measured", "plan_only", "allow_weak", "uneven", "keep_gathered", "layouts", "inputs_from"},
         "a case file");
  CaseFile c;
  c.path = path;
  TensorProgram p;
  read_run_settings(r, root, path, inputs_path, c, p);
  read_plan_settings(r, root, c);
  read_program(r, root, c, p);
  read_measured_and_expect(r, root, c);
  try {
    c.program = make_program(p);
  } catch (const Error& e) {
    // make_program names the op and its line itself.
    throw Error(ErrorKind::parse, path + ": " + e.what());
  }
  check_expected_collectives(r, c);
  for (const auto& [tensor, spec] : c.shard)
    if (!c.program.dims.count(tensor))
      r.fail(c.shard_line.at(tensor), "shard names " + tensor + ", which is not a tensor of the program");
  return c;
}

CaseFile read_case_file(const std::string& path, const std::string& inputs) {
  return parse_case_file(read_text_file(path, "case file"), path, inputs);
}

}  // namespace shardlab
