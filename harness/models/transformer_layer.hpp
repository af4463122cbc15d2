// The Transformer layer of lessons 13 and 18 as program text (TOML, harness/check/case_file.hpp):
// layer norm, multi-head self-attention, residual add, layer norm, the FFN, residual add; forward
// and the backward derived by rule. Dims: b batch 2, s queries 8, t keys 8 (the same tokens under
// their own letter, a_t = rename(a)), m embed 16, n heads 8, d head size 4, h hidden 64. Each op
// names its sublayer (part = "attention" or "ffn"). harness/cases/transformer_*.toml hold the same
// program (tests/test_transformer_layer.cpp compares them).
#pragma once
#include <string>

namespace shardlab {

// `dims`, `backward`, `ops`, `outputs` and `[inputs]`: everything but name, mesh and shard.
std::string transformer_layer_text();

}  // namespace shardlab
