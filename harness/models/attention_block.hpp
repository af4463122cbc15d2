// Causal attention on one pair of chunks, the math of ring attention without its communication
// (ring_attention.cpp moves the keys and values; this file computes with what a device holds).
// Forward beside backward, as in flash attention: the forward folds one block of keys and values
// into a running softmax; the backward recomputes the block's probabilities from the forward's
// log-sum-exp and adds the block's terms to dQ, dK and dV.
//
// Shapes: q, o, dout, dq [2c, d] (a device's two query chunks, chunk a at rows a c ..);
// k, v, dk, dv [2c, d] (the two key chunks it holds now, chunk b at rows b c ..); one block is the
// c x c scores of query chunk a against key chunk b. `diagonal`: the two are the same chunk, so key
// j is masked for query r when j > r. scale = 1 / sqrt(d).
// FLOPs per block: 4 c^2 d forward (q k^T, p v), 10 c^2 d backward.
#pragma once
#include <cstddef>
#include <vector>

#include "core/tensor.hpp"

namespace shardlab {

// The online softmax of 2c query rows: running max m, running sum l and unnormalised output acc.
struct OnlineSoftmax {
  std::vector<double> m, l;  // [2c]
  Tensor acc;                // [2c, d]
  OnlineSoftmax(std::size_t rows, std::size_t d);
};

// Scratch for one block's scores and probabilities (c x c each), reused block after block.
struct BlockScratch {
  std::vector<double> s, p;
  explicit BlockScratch(std::size_t c) : s(c * c), p(c * c) {}
};

// Folds key chunk b of (k, v) into query chunk a's running softmax.
void attention_block_forward(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t a, std::size_t b,
                             std::size_t c, bool diagonal, OnlineSoftmax& run, BlockScratch& scratch);

// The forward's end: o = acc / l, the log-sum-exp lse = m + log l and D = rowsum(dO * O) [2c] that
// the backward needs.
struct AttentionForward {
  Tensor o;
  std::vector<double> lse, D;
};
AttentionForward attention_finish(const OnlineSoftmax& run, const Tensor& dout);

// Adds key chunk b's block to dq (rows of query chunk a) and to dk, dv (rows of key chunk b).
void attention_block_backward(const Tensor& q, const Tensor& dout, const Tensor& k, const Tensor& v,
                              const AttentionForward& fwd, std::size_t a, std::size_t b, std::size_t c, bool diagonal,
                              Tensor& dq, Tensor& dk, Tensor& dv, BlockScratch& scratch);

}  // namespace shardlab
