// The exercises of `shardlab exercise`, a few per lesson: a contraction, its mesh, the operands'
// specs and the wanted output spec, at sizes small enough to run.
#include "harness/models/exercise.hpp"

namespace shardlab {

namespace {

constexpr DType f32 = DType::float32;

ExerciseCase ex(const char* lesson, const char* topic, const char* mesh, const char* eq, const char* names,
                const char* a, const char* b, const char* out, const char* dims) {
  return ExerciseCase{lesson, topic, mesh, eq, names, a, b, out, dims, f32};
}

// Lessons 01 to 10: one contraction at a time.
std::vector<ExerciseCase> first_lessons() {
  const char* xy = "X=2,Y=4";
  return {
      // 02: a sum over a split dim needs an AllReduce; over an unsplit one it needs nothing
      ex("02", "a matrix-vector sum over the split dim J", xy, "ij,j->i", "A,v,u", "_,Y", "Y", "", "i=8,j=16"),
      ex("02", "the same sum, each device keeping a quarter of u", xy, "ij,j->i", "A,v,u", "_,Y", "Y", "Y",
         "i=8,j=16"),
      ex("02", "the rows are split, the summed dim is not; u wanted whole", xy, "ij,j->i", "A,v,u", "Y,_", "_", "_",
         "i=16,j=8"),
      // 03: a matmul is a sum of products; the contracted dim decides
      ex("03", "row-wise dot products with the summed dim split over X", xy, "bi,bi->b", "p,q,r", "_,X", "_,X",
         "", "b=8,i=16"),
      ex("03", "a matmul with its inner dim split over a line of 8 devices", "X=8", "ik,kn->in", "A,B,C", "_,X",
         "X,_", "", "i=4,k=16,n=4"),
      ex("03", "the inner dim split over both axes at once", xy, "ik,kn->in", "A,B,C", "_,(X,Y)", "(X,Y),_", "",
         "i=4,k=16,n=4"),
      // 04: Case 1A, the inner dim split the same way on both operands
      ex("04", "Case 1A: K split over Y on both, C wanted whole", xy, "ik,kn->in", "A,B,C", "_,Y", "Y,_", "",
         "i=8,k=16,n=8"),
      ex("04", "Case 1A, C wanted split over Y by columns", xy, "ik,kn->in", "A,B,C", "_,Y", "Y,_", "_,Y",
         "i=8,k=16,n=8"),
      ex("04", "Case 1A with A's rows split over X as well", xy, "ik,kn->in", "A,B,C", "X,Y", "Y,_", "X,_",
         "i=8,k=16,n=8"),
      // 05: Case 1B, the inner dim split over different axes
      ex("05", "Case 1B: K over X on A, over Y on B", xy, "ik,kn->in", "A,B,C", "_,X", "Y,_", "", "i=8,k=16,n=8"),
      ex("05", "K over (X,Y) on A, over X on B: the common part stays", xy, "ik,kn->in", "A,B,C", "_,(X,Y)", "X,_",
         "", "i=8,k=16,n=8"),
      ex("05", "K split on A only", xy, "ik,kn->in", "A,B,C", "_,Y", "_,_", "", "i=8,k=16,n=8"),
      // 06: outer dims split too
      ex("06", "A's rows over X, K over Y on both", xy, "ik,kn->in", "A,B,C", "X,Y", "Y,_", "", "i=8,k=16,n=8"),
      ex("06", "the same, C left split over both axes", xy, "ik,kn->in", "A,B,C", "X,Y", "Y,_", "X,Y",
         "i=8,k=16,n=8"),
      ex("06", "outer dims on different axes, K whole, C wanted whole", xy, "ik,kn->in", "A,B,C", "Y,_", "_,X", "_,_",
         "i=8,k=16,n=8"),
      // 07: full sharding, and outer dims that meet on one axis
      ex("07", "A's rows and B's columns both over X", xy, "ik,kn->in", "A,B,C", "X,_", "_,X", "", "i=8,k=16,n=8"),
      ex("07", "every dim split: rows over X, K over Y, columns over X", xy, "ik,kn->in", "A,B,C", "X,Y", "Y,X", "",
         "i=8,k=16,n=8"),
      ex("07", "every dim split, C by rows over X and columns over Y", xy, "ik,kn->in", "A,B,C", "X,Y", "Y,X", "X,Y",
         "i=8,k=16,n=8"),
      // 08: article 003's GSPMD feed-forward layer
      ex("08", "GSPMD's first matmul: h = x W_in", xy, "bm,mh->bh", "x,W_in,h", "X,Y", "X,Y", "X,Y",
         "b=8,m=16,h=32"),
      ex("08", "GSPMD's second matmul: y = h W_out", xy, "bh,hm->bm", "h,W_out,y", "X,Y", "Y,X", "X,Y",
         "b=8,h=32,m=16"),
      ex("08", "GSPMD's first matmul with a sequence dim", xy, "bsm,mh->bsh", "x,W_in,h", "X,_,Y", "X,Y", "X,_,Y",
         "b=4,s=4,m=16,h=32"),
      // 09: Megatron on a line of devices
      ex("09", "column-parallel: W_in by columns, h wanted whole (no row matmul after it)", "Y=4", "bm,mh->bh",
         "x,W_in,h", "_,_", "_,Y", "_,_", "b=8,m=16,h=32"),
      ex("09", "row-parallel: W_out split by rows, h by columns", "Y=4", "bh,hm->bm", "h,W_out,y", "_,Y", "Y,_", "",
         "b=8,h=32,m=16"),
      ex("09", "row-parallel with y left split by batch rows", "Y=4", "bh,hm->bm", "h,W_out,y", "_,Y", "Y,_", "Y,_",
         "b=8,h=32,m=16"),
      // 10: the backward pass of the pairwise (column then row) layer
      ex("10", "dh = dy W_out^T, W_out by rows, dh wanted split by batch rows", "Y=4", "bm,hm->bh", "dy,W_out,dh",
         "_,_", "Y,_", "Y,_", "b=8,m=16,h=32"),
      ex("10", "dx = dh W_in^T, both split over the hidden dim", "Y=4", "bh,mh->bm", "dh,W_in,dx", "_,Y", "_,Y", "",
         "b=8,h=32,m=16"),
      ex("10", "dW_in = x^T dh with the batch split over X as well", xy, "bm,bh->mh", "x,dh,dW_in", "X,_", "X,Y", "",
         "b=8,m=16,h=32"),
  };
}

// Lessons 11 to 20: propagation, layers and the parallelisms.
std::vector<ExerciseCase> later_lessons() {
  const char* xy = "X=2,Y=4";
  return {
      // 11: with no output spec the product keeps its own layout (what propagation would give it)
      ex("11", "no output spec, but x's m and W_in's h both over Y", xy, "bm,mh->bh", "x,W_in,h", "X,Y", "_,Y", "",
         "b=8,m=16,h=32"),
      ex("11", "no output spec: the inner dim split over Y", xy, "bm,mh->bh", "x,W_in,h", "X,Y", "Y,_", "",
         "b=8,m=16,h=32"),
      ex("11", "an output spec whose axes are the product's, swapped", xy, "bm,mh->bh", "x,W_in,h", "X,_", "_,Y",
         "Y,X", "b=8,m=16,h=32"),
      // 12: attention
      ex("12", "attention scores, q's heads over Y but k's keys over Y", "Y=4", "hqd,hkd->hqk", "q,k,s", "Y,_,_",
         "_,Y,_", "", "h=8,q=8,k=8,d=4"),
      ex("12", "attention scores with the head dim d split over Y", "Y=4", "hqd,hkd->hqk", "q,k,s", "_,_,Y",
         "_,_,Y", "", "h=2,q=8,k=8,d=16"),
      ex("12", "attention output with the keys split over Y (sequence parallel)", "Y=4", "hqk,hkd->hqd", "p,v,o",
         "_,_,Y", "_,Y,_", "", "h=2,q=8,k=16,d=4"),
      // 13: a Transformer layer's matmuls on batch x sequence x embedding
      ex("13", "a layer norm's mean over an embedding split over Y (x times 1/m)", "Y=4", "bsm,m->bs",
         "x,inv_m,mu", "_,_,Y", "Y", "", "b=2,s=4,m=32"),
      ex("13", "the FFN's second matmul, Megatron: W_out by rows", "Y=4", "bsh,hm->bsm", "h,W_out,y", "_,_,Y", "Y,_",
         "", "b=2,s=4,h=32,m=8"),
      ex("13", "the attention projection with batch over X and embed over Y", xy, "bsm,mh->bsh", "x,W_q,q", "X,_,Y",
         "Y,_", "X,_,_", "b=4,s=4,m=16,h=8"),
      // 14: data parallelism
      ex("14", "the forward with the batch over X, h wanted whole for one loss", "X=8", "bm,mh->bh", "x,W,h", "X,_",
         "_,_", "_,_", "b=16,m=8,h=8"),
      ex("14", "the weight gradient, wanted whole on every replica", "X=8", "bm,bh->mh", "x,dh,dW", "X,_", "X,_",
         "_,_", "b=16,m=8,h=8"),
      ex("14", "the weight gradient with data over X and tensor parallelism over Y", xy, "bm,bh->mh", "x,dh,dW",
         "X,_", "X,Y", "_,Y", "b=8,m=8,h=16"),
      // 15: ZeRO: parameters, gradients and states split over the data axis
      ex("15", "ZeRO-3's forward: W's rows split over the data axis", "X=4", "bm,mh->bh", "x,W,h", "X,_", "X,_", "X,_",
         "b=8,m=16,h=8"),
      ex("15", "ZeRO-2's gradient: each replica keeps the rows it updates", "X=4", "bm,bh->mh", "x,dh,dW", "X,_",
         "X,_", "X,_", "b=8,m=16,h=8"),
      ex("15", "ZeRO-3's backward: dx needs W whole again", "X=4", "bh,mh->bm", "dh,W,dx", "X,_", "X,_", "X,_",
         "b=8,h=8,m=16"),
      // 17: data (D), pipeline (P) and tensor (T) axes
      ex("17", "3D: the column-parallel matmul, h sent whole to the next stage", "D=2,P=2,T=2", "bm,mh->bh",
         "x,W_in,h", "D,_", "_,T", "D,_", "b=8,m=8,h=16"),
      ex("17", "3D: the row-parallel matmul inside a stage", "D=2,P=2,T=2", "bh,hm->bm", "h,W_out,y", "D,T", "T,_", "",
         "b=8,h=16,m=8"),
      ex("17", "3D: W_out's gradient summed over the data axis", "D=2,P=2,T=2", "bh,bm->hm", "h,dy,dW_out", "D,T",
         "D,_", "T,_", "b=8,h=16,m=8"),
      // 18: sequence parallelism: activations split over s between the tensor-parallel blocks
      ex("18", "sequence parallel: the row matmul's sums leave split over s", "Y=4", "bsh,hm->bsm",
         "g,W_out,ff", "_,_,Y", "Y,_", "_,Y,_", "b=2,s=8,h=64,m=16"),
      ex("18", "sequence parallel: W_in's gradient from f split over s", "Y=4", "bsm,bsh->mh", "f,dh,dW_in",
         "_,Y,_", "_,_,Y", "_,Y", "b=2,s=8,m=16,h=64"),
      ex("18", "sequence parallel: a layer norm gain's gradient, summed over split tokens", "Y=4", "bsm,bsm->m",
         "df,xn,dg", "_,Y,_", "_,Y,_", "_", "b=2,s=8,m=16"),
      // 19: context parallelism: what ring attention avoids, and what it moves instead
      ex("19", "scores with queries and keys both split over the sequence, without a ring", "X=4", "sd,td->st",
         "q,k,scores", "X,_", "X,_", "X,_", "s=32,t=32,d=16"),
      ex("19", "the weighted sum of values, probabilities by query rows, values by key rows", "X=4", "st,td->sd",
         "p,v,o", "X,_", "X,_", "X,_", "s=32,t=32,d=16"),
      ex("19", "lesson 12's by keys: p split by keys, v by key rows, o wanted whole", "X=4", "st,td->sd",
         "p,v,o", "_,X", "X,_", "_,_", "s=32,t=32,d=16"),
      // 20: a mixture of experts: experts over Y, tokens (and an expert's slots) over X and Y
      ex("20", "MoE: the router's gradient, tokens split over both axes", "X=2,Y=2", "tm,te->me", "x,dl,dW_r",
         "(X,Y),_", "(X,Y),_", "_,_", "t=128,m=8,e=8"),
      ex("20", "MoE: an expert's first matmul, its slots over X, its weights' m over X too", "X=2,Y=2",
         "ecm,emh->ech", "x,W_in,h", "Y,X,_", "Y,X,_", "Y,X,_", "e=8,c=16,m=8,h=16"),
      ex("20", "MoE: the experts' weight gradient, each expert data parallel over X", "X=2,Y=2", "ecm,ech->emh",
         "x,dh,dW_in", "Y,X,_", "Y,X,_", "Y,_,_", "e=8,c=16,m=8,h=16"),
      // 21: the planner's byte terms, one by one, on its miniature mesh
      ex("21", "the plan's TP term: a stage's row matmul, its sums over T, the batch over D", "D=2,P=2,T=2",
         "bh,hm->bm", "h,W_out,y", "D,T", "T,_", "D,_", "b=8,h=16,m=8"),
      ex("21", "the plan's DP term under ZeRO: W_in's gradient, each replica keeping its rows", "D=2,P=2,T=2",
         "bm,bh->mh", "x,dh,dW_in", "D,_", "D,T", "D,T", "b=8,m=8,h=16"),
  };
}

std::vector<ExerciseCase> make_bank() {
  std::vector<ExerciseCase> bank = first_lessons();
  for (auto& e : later_lessons()) bank.push_back(std::move(e));
  return bank;
}

}  // namespace

const std::vector<ExerciseCase>& exercise_bank() {
  static const std::vector<ExerciseCase> bank = make_bank();
  return bank;
}

}  // namespace shardlab
