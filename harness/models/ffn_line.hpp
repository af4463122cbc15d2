// The Megatron lessons (09, 10) cut each FFN weight over one line of devices, into equal slices of
// M and of H. A mesh or dims that cannot do that get one sentence in the learner's terms (the
// option they typed, what it must be, and a value that works) before anything is printed, instead
// of the planner's words about strategies.
#pragma once
#include <string>

#include "harness/check/options.hpp"
#include "harness/models/ffn.hpp"

namespace shardlab {

// Throws Error (exit 2) for a mesh of more than one axis, or a line whose length does not divide
// M and H. `who` names the lesson ("lesson 09"); the defaults tell what the user typed from what
// they left alone.
void refuse_bad_ffn_line(const CommonOptions& common, const std::string& default_mesh, const std::string& dims_flag,
                         const std::string& default_dims, const std::string& who);

}  // namespace shardlab
