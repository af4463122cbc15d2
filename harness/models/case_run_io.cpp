#include "harness/models/case_run_io.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

std::string io_shape_words(const Shape& shape) {
  std::string out;
  for (std::size_t d : shape) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "(" + out + (shape.size() == 1 ? ",)" : ")");
}

std::string io_index_words(const Shape& shape, std::size_t flat) {
  std::string out;
  for (std::size_t d = shape.size(); d-- > 0;) {
    out = std::to_string(flat % shape[d]) + (out.empty() ? "" : ", ") + out;
    flat /= shape[d];
  }
  return "[" + out + "]";
}

}  // namespace

std::string InputsUsed::text() const {
  if (source.empty()) return "";
  std::string out = "Inputs read from " + source + ": " + join(read, ", ") + "\n";
  if (!generated.empty()) out += "  generated (seeded, as without a file): " + join(generated, ", ") + "\n";
  if (!unused.empty()) out += "  in the file but no input of this program: " + join(unused, ", ") + "\n";
  return out;
}

namespace {

// Each of `tensors` the arrays name replaced by its array rounded to `dtype`, its shape and values
// checked first; Error(io) when the arrays name none of them.
InputsUsed take_arrays(const NamedArrays& files, const std::vector<std::pair<std::string, Tensor*>>& tensors,
                       DType dtype) {
  InputsUsed u;
  u.source = files.source;
  for (const auto& [name, tensor] : tensors) {
    const auto it = files.arrays.find(name);
    if (it == files.arrays.end()) {
      u.generated.push_back(name);
      continue;
    }
    const Shape want = shape_of(*tensor), got = shape_of(it->second.data);
    if (got != want)
      throw Error(ErrorKind::rank_mismatch, files.where(name) + " has shape " + io_shape_words(got) + "; the input " + name +
                                                " here is " + io_shape_words(want));
    refuse_non_finite(files.where(name), it->second.data);
    *tensor = rounded(it->second.data, dtype);
    u.read.push_back(name + " (" + npy_type_name(it->second.type) + ")");
  }
  for (const auto& [name, array] : files.arrays)
    if (std::none_of(tensors.begin(), tensors.end(), [&](const auto& t) { return t.first == name; })) u.unused.push_back(name);
  if (u.read.empty()) {
    std::vector<std::string> names;
    for (const auto& t : tensors) names.push_back(t.first);
    throw Error(ErrorKind::io, files.source + " names none of the inputs here (" + join(names, ", ") + "); it holds " +
                                   join(u.unused, ", "));
  }
  return u;
}

std::vector<std::pair<std::string, Tensor*>> named(const TensorProgram& p, std::map<std::string, Tensor>& values) {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (const auto& in : p.inputs) out.push_back({in.first, &values.at(in.first)});
  return out;
}

}  // namespace

std::map<std::string, Tensor> case_inputs(const CaseFile& c, const TensorProgram& p, InputsUsed* used) {
  std::map<std::string, Tensor> out = program_inputs(p, c.seed);
  if (c.inputs_from.empty()) return out;
  // float64: every value as stored; the run rounds its inputs to its element type itself.
  const InputsUsed u = take_arrays(c.input_files, named(p, out), DType::float64);
  if (used) *used = u;
  return out;
}

std::string read_named_inputs(const std::string& path, const std::vector<std::pair<std::string, Tensor*>>& tensors,
                              DType dtype) {
  return path.empty() ? "" : take_arrays(load_arrays(path), tensors, dtype).text();
}

template <class T>
void read_ffn_inputs(FfnInputsOf<T>& in, const std::string& path, DType dtype, bool backward) {
  if (path.empty()) return;
  Tensor x = converted<double>(in.x), w_in = converted<double>(in.w_in), w_out = converted<double>(in.w_out),
         r = backward ? converted<double>(in.r) : Tensor();
  std::vector<std::pair<std::string, Tensor*>> tensors = {{"x", &x}, {"W_in", &w_in}, {"W_out", &w_out}};
  if (backward) tensors.push_back({"dy", &r});
  read_named_inputs(path, tensors, dtype);
  in.x = converted<T>(x);
  in.w_in = converted<T>(w_in);
  in.w_out = converted<T>(w_out);
  if (backward) in.r = converted<T>(r);
}
template void read_ffn_inputs<double>(FfnInputsOf<double>&, const std::string&, DType, bool);
template void read_ffn_inputs<float>(FfnInputsOf<float>&, const std::string&, DType, bool);
template void read_ffn_inputs<bfloat16>(FfnInputsOf<bfloat16>&, const std::string&, DType, bool);

std::map<std::string, Tensor> program_inputs_from(const std::string& path, const TensorProgram& p, std::uint64_t seed) {
  std::map<std::string, Tensor> out = program_inputs(p, seed);
  if (!path.empty()) take_arrays(load_arrays(path), named(p, out), DType::float64);
  return out;
}

std::string PowerLimit::text() const {
  return tensor + " at " + index + ": tolerance " + format_number(tolerance, "%.3g") + " + error " +
         format_number(error, "%.3g") + " there (value " + format_number(value, "%.3g") + "), against the RMS " +
         format_number(rms, "%.3g") + " of " + tensor + ": power " + format_number(power, "%.3g");
}

PowerLimit power_limit(const std::string& tensor, const Tensor& got, const Tensor& want, const Tensor& tolerance) {
  PowerLimit l;
  l.tensor = tensor;
  double sum_sq = 0, worst = -1;
  std::size_t at = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = want.data()[i], err = std::fabs(got.data()[i] - w);
    if (std::isfinite(w)) sum_sq += w * w;
    const double guaranteed = tolerance.data()[i] + (std::isfinite(err) ? err : 0.0);
    if (guaranteed > worst) {
      worst = guaranteed;
      at = i;
    }
  }
  l.rms = want.size() ? std::sqrt(sum_sq / static_cast<double>(want.size())) : 0.0;
  l.power = worst <= 0 ? 0.0 : l.rms > 0 ? worst / l.rms : INFINITY;
  l.index = io_index_words(shape_of(want), at);
  l.tolerance = want.size() ? tolerance.data()[at] : 0.0;
  l.error = want.size() ? std::fabs(got.data()[at] - want.data()[at]) : 0.0;
  l.value = want.size() ? want.data()[at] : 0.0;
  return l;
}

std::map<std::string, Tensor> assembled_outputs(const ProgramPlan& plan, const RunResult& run) {
  std::map<std::string, Tensor> out;
  for (const auto& name : plan.program.outputs) {
    std::vector<Tensor> blocks;
    for (const auto& device : run.outputs) {
      const auto it = device.find(name);
      if (it == device.end()) throw Error(ErrorKind::device, "a device returned no block named " + name);
      blocks.push_back(it->second);
    }
    out[name] = assemble(plan.mesh, plan.propagation.specs.at(name).spec, plan.program.shape(name), blocks, name).tensor;
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> saved_arrays(const ProgramPlan& plan, const std::map<std::string, Tensor>& got,
                                                         const std::map<std::string, Tensor>& inputs,
                                                         const ProgramReference& ref) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& name : plan.program.outputs) out.push_back({name, got.at(name)});
  // The upstream gradients, as the run held them (rounded to its element type).
  for (const auto& [output, seed] : plan.gradient.seeds) out.push_back({seed, ref.values.count(seed) ? ref.values.at(seed) : inputs.at(seed)});
  for (const auto& name : plan.program.outputs) out.push_back({"ref/" + name, ref.values.at(name)});
  return out;
}

}  // namespace shardlab
