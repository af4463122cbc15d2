#!/usr/bin/env python3
"""A layer's weights from NumPy through shardlab and back, against PyTorch autograd.

For each layer (the transformer layer of harness/cases/transformer_megatron.toml, the attention of
harness/cases/attention_megatron.toml, the layer norm of tests/torch/layer_norm.toml): draws its
inputs and the upstream gradient dy with NumPy, saves them with numpy.savez, runs

    shardlab run CASE --inputs w.npz --save out.npz --dtype float64 --quiet

loads out.npz (y, every input's gradient dNAME, and ref/NAME, the unsharded reference's) and
computes the same layer with PyTorch in float64: y, then loss = sum(y * dy) and loss.backward().
Each saved tensor, sharded and reference, must agree with PyTorch's within

    max |shardlab - torch| <= TOL * max |torch|,   TOL = 1e-9 (float64), 1e-5 (float32)

float64 rounding through a layer is about 1e-15 of its values, so 1e-9 leaves six orders for
harmless differences of summation order while a wrong definition (a layer norm's epsilon, GeLU's
tanh form for its erf form, softmax over the wrong dim) is off by 1e-6 or far more. The same
again in the case's own float32 (inputs rounded to float32 first), where float32 rounding through
a layer is below 1e-6 of its values.

Usage: roundtrip.py [--shardlab build/bin/shardlab] [--keep DIR] [layer ...]
Exit 0: every comparison agreed; 1: one did not (each printed); 2: shardlab refused or failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOL = {"float64": 1e-9, "float32": 1e-5}


def layer_norm(x, g, c):
    # The cases write it out: (x - mean) * rsqrt(var + 1e-5) * g + c, the biased variance over m.
    return torch.nn.functional.layer_norm(x, x.shape[-1:], g, c, eps=1e-5)


def attention(x, W_q, W_k, W_v, W_o, causal_scale=0.5):
    q = torch.einsum("bsm,mnd->bsnd", x, W_q)
    k = torch.einsum("btm,mnd->btnd", x, W_k)
    v = torch.einsum("btm,mnd->btnd", x, W_v)
    p = torch.softmax(causal_scale * torch.einsum("bsnd,btnd->bnst", q, k), dim=-1)
    return torch.einsum("bsnd,ndm->bsm", torch.einsum("bnst,btnd->bsnd", p, v), W_o)


def transformer(x, g1, c1, W_q, W_k, W_v, W_o, g2, c2, W_in, W_out):
    r1 = x + attention(layer_norm(x, g1, c1), W_q, W_k, W_v, W_o)
    h = torch.einsum("bsm,mh->bsh", layer_norm(r1, g2, c2), W_in)
    return r1 + torch.einsum("bsh,hm->bsm", torch.nn.functional.gelu(h), W_out)


# name: (case file, the layer, its inputs' shapes in the case's dims)
b, s, m, n, d, h = 2, 8, 16, 8, 4, 64
LAYERS = {
    "transformer": ("harness/cases/transformer_megatron.toml", transformer,
                    {"x": (b, s, m), "g1": (m,), "c1": (m,), "W_q": (m, n, d), "W_k": (m, n, d), "W_v": (m, n, d),
                     "W_o": (n, d, m), "g2": (m,), "c2": (m,), "W_in": (m, h), "W_out": (h, m)}),
    "attention": ("harness/cases/attention_megatron.toml", attention,
                  {"x": (2, 4, 16), "W_q": (16, 4, 4), "W_k": (16, 4, 4), "W_v": (16, 4, 4), "W_o": (4, 4, 16)}),
    "layer_norm": ("tests/torch/layer_norm.toml", layer_norm, {"x": (2, 8, 16), "g": (16,), "c": (16,)}),
}


def weights(shapes, seed):
    """Inputs as a user's might be: normal, weights scaled by 1/sqrt(fan-in), scales near 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        w = rng.standard_normal(shape)
        if name.startswith("W_"):
            w /= np.sqrt(shape[0] * (shape[1] if name == "W_o" else 1))
        elif name.startswith("g"):
            w = 1 + 0.1 * w
        elif name.startswith("c"):
            w = 0.1 * w
        out[name] = w.astype(np.float32)
    return out


def check(label, got, want, tol, worst):
    """got against want within tol * max|want|; the largest share of its tolerance goes into worst."""
    scale = float(np.max(np.abs(want))) or 1.0
    err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
    ok = err <= tol * scale
    worst.append((err / (tol * scale) if tol > 0 else (0.0 if err == 0 else float("inf")), label))
    if not ok:
        print(f"  FAIL {label}: max|shardlab - torch| {err:.3g}, more than {tol:g} x max|torch| {scale:.3g}")
    return ok


def run_layer(name, shardlab, work, dtype):
    case, fn, shapes = LAYERS[name]
    inputs = weights(shapes, seed=len(name))
    y_shape = shapes["x"]
    inputs["dy"] = np.random.default_rng(99).standard_normal(y_shape).astype(np.float32)
    w_path, out_path = os.path.join(work, f"{name}_w.npz"), os.path.join(work, f"{name}_{dtype}_out.npz")
    np.savez(w_path, **inputs)
    cmd = [shardlab, "run", os.path.join(ROOT, case), "--inputs", w_path, "--save", out_path, "--dtype", dtype, "--quiet"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{name}: {' '.join(cmd)} exited {run.returncode}: {run.stdout.strip()} {run.stderr.strip()}")
        sys.exit(2)
    saved = np.load(out_path)
    # PyTorch in float64 on the values shardlab ran on (its inputs, as stored in the file).
    leaves = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in inputs.items() if k != "dy"}
    y = fn(**leaves)
    (y * torch.tensor(inputs["dy"].astype(np.float64))).sum().backward()
    ok, worst = True, []
    for prefix in ("", "ref/"):
        ok &= check(prefix + "y", saved[prefix + "y"], y.detach().numpy(), TOL[dtype], worst)
        for k, leaf in leaves.items():
            ok &= check(prefix + "d" + k, saved[prefix + "d" + k], leaf.grad.numpy(), TOL[dtype], worst)
    ok &= check("dy", saved["dy"], inputs["dy"].astype(np.float64), 0, worst)
    share, label = max(worst)
    print(f"{'ok  ' if ok else 'FAIL'} {name:<11} {dtype}: {len(worst)} tensors (y, the gradients, ref/ and dy) "
          f"within {TOL[dtype]:g} x max|torch|; closest {label} at {share:.2g} of it  [{run.stdout.strip()}]")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shardlab", default=os.path.join(ROOT, "build/bin/shardlab"))
    parser.add_argument("--keep", help="write the .npz files here instead of a temporary folder")
    parser.add_argument("layers", nargs="*", default=list(LAYERS), help="of " + ", ".join(LAYERS) + " (default: all)")
    args = parser.parse_args()
    for name in args.layers:
        if name not in LAYERS:
            parser.error(f"no layer '{name}'; give any of {', '.join(LAYERS)}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        ok = all([run_layer(name, args.shardlab, work, dtype) for name in args.layers for dtype in ("float64", "float32")])
    print("PASS: shardlab agrees with PyTorch autograd" if ok else "FAIL: shardlab differs from PyTorch autograd")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
