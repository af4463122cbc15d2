#include "harness/plan/program.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

const std::vector<std::pair<std::string, OpKind>> kOps = {
    {"einsum", OpKind::einsum}, {"relu", OpKind::unary},   {"gelu", OpKind::unary},  {"exp", OpKind::unary},
    {"tanh", OpKind::unary},    {"neg", OpKind::unary},    {"square", OpKind::unary}, {"rsqrt", OpKind::unary},
    {"add", OpKind::binary},    {"sub", OpKind::binary},   {"mul", OpKind::binary},  {"div", OpKind::binary},
    {"sum", OpKind::reduce},    {"max", OpKind::reduce},   {"mean", OpKind::reduce}, {"softmax", OpKind::softmax},
    {"broadcast", OpKind::broadcast}, {"eq", OpKind::binary}, {"relu_grad", OpKind::unary},
    {"gelu_grad", OpKind::unary},    {"tanh_grad", OpKind::unary}, {"square_grad", OpKind::unary},
    {"rsqrt_grad", OpKind::unary}, {"copy", OpKind::unary}, {"is_max", OpKind::binary}, {"scale", OpKind::unary},
    {"shift", OpKind::unary}, {"rename", OpKind::rename}, {"stop_gradient", OpKind::unary},
    {"roll", OpKind::unary}, {"split", OpKind::split}, {"concat", OpKind::concat}};

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorKind::parse, what); }

// The largest tensor a program may name: 2^31 elements (16 GiB as the float64 reference holds it).
constexpr double kMaxElements = 2147483648.0;

bool distinct_letters(const std::string& dims) {
  std::set<char> seen(dims.begin(), dims.end());
  return seen.size() == dims.size();
}

bool contains_all(const std::string& big, const std::string& small) {
  return std::all_of(small.begin(), small.end(), [&](char c) { return big.find(c) != std::string::npos; });
}

}  // namespace

bool op_kind_of(const std::string& name, OpKind& kind) {
  for (const auto& [n, k] : kOps)
    if (n == name) {
      kind = k;
      return true;
    }
  return false;
}

ProgramOp make_op(const std::string& out, const std::string& name, std::vector<std::string> in, const std::string& eq) {
  ProgramOp o;
  if (!op_kind_of(name, o.kind)) throw Error(ErrorKind::unsupported, "make_op: no op is named " + name);
  o.out = out;
  o.name = name;
  o.in = std::move(in);
  o.eq = eq;
  return o;
}

std::string op_names() {
  std::vector<std::string> names;
  for (const auto& kv : kOps) names.push_back(kv.first);
  return join(names, ", ");
}

Shape TensorProgram::shape(const std::string& tensor) const {
  Shape s;
  for (char c : dims.at(tensor)) s.push_back(sizes.at(c));
  return s;
}

bool TensorProgram::is_input(const std::string& tensor) const {
  return std::any_of(inputs.begin(), inputs.end(), [&](const auto& kv) { return kv.first == tensor; });
}

std::vector<std::string> TensorProgram::tensors() const {
  std::vector<std::string> out;
  for (const auto& kv : inputs) out.push_back(kv.first);
  for (const auto& op : ops) out.push_back(op.out);
  return out;
}

std::string op_label(const TensorProgram& p, std::size_t i) {
  const ProgramOp& op = p.ops[i];
  return "op " + std::to_string(i + 1) + " (" + op.out + " = " + op.name + (op.eq.empty() ? "" : " " + op.eq) +
         (op.line > 0 ? ", line " + std::to_string(op.line) : "") + ")";
}

namespace {

// Every letter of `dims` a distinct lower-case dim that p.sizes gives a size.
void check_dims(const TensorProgram& p, const std::string& dims, const std::string& where) {
  if (!distinct_letters(dims)) fail(where + " names a dim twice: '" + dims + "'");
  for (char c : dims) {
    if (!std::islower(static_cast<unsigned char>(c)))
      fail(where + " has dim '" + std::string(1, c) + "': dims are single lower-case letters");
    if (!p.sizes.count(c)) fail(where + " uses dim '" + std::string(1, c) + "', which `dims` gives no size");
  }
}

// The fields each kind of op takes (eq, to, value, over) given where they belong and only there.
void check_fields(const TensorProgram& p, const ProgramOp& op, const std::vector<std::string>& in_dims,
                  const std::string& where) {
  if (op.kind != OpKind::einsum && !op.eq.empty()) fail(where + ": only einsum takes an eq");
  if ((op.kind == OpKind::broadcast || op.kind == OpKind::rename || op.kind == OpKind::concat) == op.to.empty())
    fail(where + (op.to.empty() ? " needs to = \"<dims>\"" : ": only broadcast, rename and concat take to"));
  const bool roll = op.name == "roll", split = op.kind == OpKind::split;
  if ((op.name == "scale" || op.name == "shift" || roll || split) != op.has_value)
    fail(where + (op.has_value ? ": only scale, shift, roll and split take value" : " needs value = <number>"));
  if ((op.kind == OpKind::reduce || op.kind == OpKind::softmax || roll || split || op.kind == OpKind::concat) ==
      op.over.empty())
    fail(where + (op.over.empty() ? " needs over = \"<dims>\""
                                  : ": only reductions, softmax, roll, split and concat take over"));
  if (split && (op.over.size() != 1 || in_dims[0].find(op.over[0]) == std::string::npos))
    fail(where + ": split takes over = one dim of " + op.in[0] + " '" + in_dims[0] + "', not '" + op.over + "'");
  if (split && (op.value != std::floor(op.value) || op.value < 0 || op.value >= double(p.sizes.at(op.over[0]))))
    fail(where + ": split takes value = a part from 0 to " + std::to_string(p.sizes.at(op.over[0]) - 1) + " of dim '" +
         op.over + "', not " + format_number(op.value, "%g"));
  if (roll && (op.over.size() != 1 || in_dims[0].find(op.over[0]) == std::string::npos))
    fail(where + ": roll takes over = one dim of " + op.in[0] + " '" + in_dims[0] + "', not '" + op.over + "'");
  if (roll && (op.value != std::floor(op.value) || std::abs(op.value) > 1e15))
    fail(where + ": roll takes a whole number of places, not value = " + format_number(op.value, "%g"));
}

// The dims of op i's result, from its operands' dims `in_dims`; fail() where they do not fit the op.
std::string out_dims_of(const TensorProgram& p, std::size_t i, const ProgramOp& op,
                        const std::vector<std::string>& in_dims, const std::string& where) {
  std::string out;
  switch (op.kind) {
    case OpKind::einsum: {
      if (op.eq.find("->") == std::string::npos) fail(where + " needs eq = \"<a>,<b>-><out>\"");
      Einsum e;
      try {
        e = Einsum::parse(op.eq);
      } catch (const Error& err) {
        fail(where + ": " + err.what());
      }
      const std::string sides[2] = {e.a, e.b};
      for (int k = 0; k < 2; ++k)
        if (in_dims[k] != sides[k])
          fail(where + ": operand " + op.in[k] + " has dims '" + in_dims[k] + "' but the eq's " +
               (k == 0 ? "first" : "second") + " operand is '" + sides[k] + "'");
      out = e.out;
      break;
    }
    case OpKind::unary: out = in_dims[0]; break;
    case OpKind::split:
      for (char c : in_dims[0])
        if (c != op.over[0]) out += c;
      break;
    case OpKind::concat: {
      check_dims(p, op.to, where);
      if (op.to.find(op.over[0]) == std::string::npos)
        fail(where + ": to = '" + op.to + "' lacks the dim '" + op.over + "' it stacks along");
      std::string part;
      for (char c : op.to)
        if (c != op.over[0]) part += c;
      for (std::size_t k = 0; k < op.in.size(); ++k)
        if (in_dims[k] != part)
          fail(where + ": operand " + op.in[k] + " has dims '" + in_dims[k] + "'; each part must have '" + part +
               "' (to = '" + op.to + "' without '" + op.over + "')");
      out = op.to;
      break;
    }
    case OpKind::rename:
      if (op.to.size() != in_dims[0].size())
        fail(where + ": to = '" + op.to + "' names " + std::to_string(op.to.size()) + " dims, " + op.in[0] + " '" +
             in_dims[0] + "' has " + std::to_string(in_dims[0].size()));
      check_dims(p, op.to, where);
      for (std::size_t d = 0; d < op.to.size(); ++d)
        if (p.sizes.at(op.to[d]) != p.sizes.at(in_dims[0][d]))
          fail(where + ": dim '" + std::string(1, op.to[d]) + "' (size " + std::to_string(p.sizes.at(op.to[d])) +
               ") cannot rename '" + std::string(1, in_dims[0][d]) + "' (size " +
               std::to_string(p.sizes.at(in_dims[0][d])) + ")");
      out = op.to;
      break;
    case OpKind::broadcast:
      for (char c : in_dims[0])
        if (op.to.find(c) == std::string::npos)
          fail(where + ": " + op.in[0] + " has dim '" + std::string(1, c) + "', which to = '" + op.to + "' lacks");
      out = op.to;
      break;
    case OpKind::binary:
      if (op.name == "is_max") {  // its bound (program_check.hpp) holds only for a max of the first
        bool is_its_max = false;
        for (std::size_t k = 0; k < i; ++k)
          if (p.ops[k].out == op.in[1])
            is_its_max = p.ops[k].name == "max" && p.ops[k].in[0] == op.in[0];
        if (!is_its_max) fail(where + ": is_max's second operand must be max(" + op.in[0] + ") over some dims");
      }
      if (contains_all(in_dims[0], in_dims[1]))
        out = in_dims[0];
      else if (contains_all(in_dims[1], in_dims[0]))
        out = in_dims[1];
      else
        fail(where + ": " + op.in[0] + " '" + in_dims[0] + "' and " + op.in[1] + " '" + in_dims[1] +
             "' do not broadcast: one's dims must all be the other's");
      break;
    case OpKind::reduce:
    case OpKind::softmax:
      if (!distinct_letters(op.over)) fail(where + ": over names a dim twice: '" + op.over + "'");
      for (char c : op.over)
        if (in_dims[0].find(c) == std::string::npos)
          fail(where + ": over names dim '" + std::string(1, c) + "', which " + op.in[0] + " '" + in_dims[0] +
               "' does not have");
      if (op.kind == OpKind::softmax) {
        if (op.name == "softmax" && op.over.size() != 1)
          fail(where + ": softmax is over one dim, not '" + op.over + "'");
        out = in_dims[0];
      } else {
        for (char c : in_dims[0])
          if (op.over.find(c) == std::string::npos) out += c;
      }
      break;
  }
  return out;
}

}  // namespace

TensorProgram make_program(TensorProgram p) {
  p.dims.clear();
  auto define = [&](const std::string& name, const std::string& dims, const std::string& where) {
    if (!is_identifier(name)) fail(where + ": '" + name + "' is not a tensor name (letters, digits and _)");
    if (p.dims.count(name)) fail(where + " defines " + name + ", which is already defined");
    double elements = 1;
    for (char c : dims) elements *= double(p.sizes.at(c));
    if (elements > kMaxElements)
      fail(where + ": " + name + "[" + dims + "] would hold " + format_number(elements, "%.3g") +
           " elements; a tensor may hold at most 2^31");
    p.dims[name] = dims;
  };
  for (const auto& [name, dims] : p.inputs) {
    check_dims(p, dims, "input " + name);
    define(name, dims, "input " + name);
  }
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    ProgramOp& op = p.ops[i];
    const std::string where = op_label(p, i);
    if (!op_kind_of(op.name, op.kind)) fail(where + ": '" + op.name + "' is not an op; the ops are " + op_names());
    std::size_t want = op.kind == OpKind::einsum || op.kind == OpKind::binary ? 2 : 1;
    if (op.kind == OpKind::concat) {  // one operand per part of the dim it stacks along
      if (op.over.size() != 1 || !p.sizes.count(op.over[0]))
        fail(where + " needs over = \"<one dim>\", a dim `dims` gives a size");
      want = p.sizes.at(op.over[0]);
    }
    if (op.in.size() != want)
      fail(where + " takes " + std::to_string(want) + " operand" + (want > 1 ? "s" : "") + ", not " +
           std::to_string(op.in.size()));
    std::vector<std::string> in_dims;
    for (const auto& t : op.in) {
      if (!p.dims.count(t)) fail(where + " reads " + t + ", which is not an input or the output of an earlier op");
      in_dims.push_back(p.dims.at(t));
    }
    check_fields(p, op, in_dims, where);
    const std::string out = out_dims_of(p, i, op, in_dims, where);
    check_dims(p, out, where);
    define(op.out, out, where);
  }
  if (p.outputs.empty()) fail("the program names no outputs");
  for (const auto& o : p.outputs)
    if (!p.dims.count(o)) fail("output " + o + " is not an input or the output of an op");
  return p;
}

std::string program_text(const TensorProgram& p) {
  std::string out;
  for (const auto& [name, dims] : p.inputs) out += "  input  " + name + "[" + dims + "] " + shape_text(p.shape(name)) + "\n";
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const ProgramOp& op = p.ops[i];
    std::string rhs = op.name + "(" + join(op.in, ", ");
    if (!op.eq.empty()) rhs += "; " + op.eq;
    if (!op.over.empty()) rhs += "; over " + op.over;
    if (!op.to.empty()) rhs += "; to " + op.to;
    if (op.scale != 1) rhs += "; times " + format_number(op.scale, "%.6g");
    if (op.has_value) rhs += "; value " + format_number(op.value, "%.6g");
    const std::string number = std::to_string(i + 1);
    out += "  op " + number + std::string(number.size() < 4 ? 4 - number.size() : 1, ' ') + op.out + "[" + p.dims.at(op.out) + "] = " + rhs + ")\n";
  }
  out += "  output " + join(p.outputs, ", ") + "\n";
  return out;
}

}  // namespace shardlab
