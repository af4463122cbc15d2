// Meshes every program must refuse, unquoted: tests/test_hostile_input.cpp gives them to the
// binaries (through the shell, quoted), tests/test_mesh.cpp to Mesh::parse.
#pragma once
#include <string>
#include <vector>

namespace shardlab::testing {

// Empty (the command line refuses these before any parser; `shardlab ffn` would read an empty mesh
// as its default) or sizes too large, zero or repeated: every binary gets each.
inline const std::vector<std::string> kBadMeshSizes = {"", " ", "X=0", "X=-1", "X=2,X=2", "X=99999999999",
                                                       "X=4096,Y=2", "0x4", "64x65x2"};

// Malformed text, each refused by Mesh::parse, which every binary reaches: the binaries take turns.
inline const std::vector<std::string> kBadMeshTexts = {"X",       "X=",      "=2",     "_=2",   "X=2,Y=",
                                                       "2x",      "x2",      "X=1e3",  "X=2;Y=4", "X=2,,Y=2",
                                                       "X=abc",   "X=2.5",   "X Y=2",  "X=+2",  "X=0x10",
                                                       "1-2=2",   "X=2,Y=4,", ",X=2",  "X==2"};

}  // namespace shardlab::testing
