// Mesh: devices arranged in an array with named axes, e.g. X=2,Y=4 (8 devices).
// Device ids are row-major over the axes: on X=2,Y=4 device 5 sits at X=1,Y=1.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace shardlab {

// How a tensor dim that does not divide its mesh axes is split:
//   none   refused, as before: "dim 0 of A (size 50257) is not divisible by mesh axis X (size 8)"
//   chunk  as torch.chunk / DTensor: blocks of ceil(d/n) rows, the last ones shorter (or empty)
//   pad    as JAX: the same blocks, each stored (and sent) padded with zeros to ceil(d/n) rows
// A dim split over several axes, (X,Y), splits level by level (X first, then each X block over Y),
// as DTensor nests its Shard placements: gathering Y then leaves exactly X's blocks.
// Dims that divide split the same way under all three.
enum class Uneven { none, chunk, pad };
Uneven parse_uneven(const std::string& text);  // "none" | "chunk" | "pad"; throws Error(parse)
std::string uneven_name(Uneven u);

class Mesh {
 public:
  Mesh() = default;
  Mesh(std::vector<std::string> names, std::vector<int> sizes);  // validates names and sizes

  // "X=2,Y=4", "mesh_rows=2,mesh_cols=4", or shorthand "2x4" (axes X, Y, Z, W, then A1, A2 ...).
  static Mesh parse(const std::string& text);

  int rank() const { return static_cast<int>(names_.size()); }
  int devices() const;
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<int>& sizes() const { return sizes_; }
  bool has_axis(const std::string& name) const;
  int axis(const std::string& name) const;  // index; throws Error(unknown_axis)
  int axis_size(const std::string& name) const { return sizes_[axis(name)]; }
  int axes_size(const std::vector<std::string>& axes) const;  // product of their sizes

  std::vector<int> coords(int device) const;
  int device(const std::vector<int>& coords) const;

  // The devices that share `device`'s coordinates on every axis not in `axes`, ordered
  // row-major over `axes` in the order given (first axis major). `device` is one of them.
  std::vector<int> group(int device, const std::vector<std::string>& axes) const;
  // All such groups, in order of their first member.
  std::vector<std::vector<int>> groups(const std::vector<std::string>& axes) const;
  // Position of `device` in its group along `axes` (row-major index of its coords on `axes`).
  int index_along(int device, const std::vector<std::string>& axes) const;

  std::string text() const;  // "X=2,Y=4"
  // The rule for dims that do not divide (none unless a command asks: --uneven, case files).
  Uneven uneven() const { return uneven_; }
  void set_uneven(Uneven u) { uneven_ = u; }
  // ASCII picture: a grid of the last two axes, one grid per index of the leading axes.
  // `label(d)` fills device d's box (defaults to "d<id>"). No line is wider than `columns`: a grid
  // too wide goes in bands of the last axis's indices, one under another, and a label too wide for
  // a line on its own is cut, ending in '~'.
  std::string picture(const std::function<std::string(int)>& label = nullptr, std::size_t columns = 100) const;

 private:
  std::vector<std::string> names_;
  std::vector<int> sizes_;
  Uneven uneven_ = Uneven::none;
};

// "X,Y" -> {"X","Y"}; "" -> {}. Checks every axis exists and none repeats.
std::vector<std::string> parse_axes(const Mesh& mesh, const std::string& text);
std::string axes_text(const std::vector<std::string>& axes);  // {"X","Y"} -> "X,Y"

}  // namespace shardlab
