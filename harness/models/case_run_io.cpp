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

std::map<std::string, Tensor> case_inputs(const CaseFile& c, const TensorProgram& p, InputsUsed* used) {
  std::map<std::string, Tensor> out = program_inputs(p, c.seed);
  if (c.inputs_from.empty()) return out;
  InputsUsed u;
  u.source = c.inputs_from;
  const NamedArrays& files = c.input_files;
  for (const auto& [name, letters] : p.inputs) {
    const auto it = files.arrays.find(name);
    if (it == files.arrays.end()) {
      u.generated.push_back(name);
      continue;
    }
    const Shape want = p.shape(name), got(it->second.data.shape().begin(), it->second.data.shape().end());
    if (got != want)
      throw Error(ErrorKind::rank_mismatch, files.where(name) + " has shape " + io_shape_words(got) + "; the program's " + name +
                                                " (" + letters + ") is " + io_shape_words(want));
    refuse_non_finite(files.where(name), it->second.data);
    out[name] = it->second.data;
    u.read.push_back(name + " (" + npy_type_name(it->second.type) + ")");
  }
  for (const auto& [name, array] : files.arrays)
    if (std::none_of(p.inputs.begin(), p.inputs.end(), [&](const auto& in) { return in.first == name; }))
      u.unused.push_back(name);
  if (u.read.empty()) {
    std::vector<std::string> names;
    for (const auto& in : p.inputs) names.push_back(in.first);
    throw Error(ErrorKind::io, c.inputs_from + " names none of the program's inputs (" + join(names, ", ") +
                                   "); it holds " + join(u.unused, ", "));
  }
  if (used) *used = u;
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
