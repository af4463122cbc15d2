#!/usr/bin/env python3
"""Tensors from NumPy through shardlab and back, against PyTorch: layers, MoE gating, an Adam step.

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

The mixture of experts (moe): x, W_router, W_in, W_out and dy through

    shardlab moe --inputs moe.npz --save out.npz --mesh X=2,Y=2 --top-k 2 --capacity-factor 1 --dtype D

against PyTorch written from the definition, not from shardlab's code: softmax over all E gate
logits, torch.topk, the k chosen probabilities renormalised to sum 1; an expert's slot its place
among the assignments to it in its group (a device's tokens), token after token and choice after
choice (a cumulative sum of one-hot rows), kept when below C = ceil(factor k tokens / E); out the
gates of the kept choices times relu(x W_in[e]) W_out[e]; the gradients by autograd. Logits, gates,
out and the gradients within TOL as above; the chosen experts, slots, kept and routed counts and C
exactly (a different choice or drop is a different rule, not rounding).

One Adam step (adam): parameters, gradients and moments through

    shardlab adam --inputs adam.npz --step T --lr ... --beta1 ... --beta2 ... --eps ... --save out.npz

against torch.optim.Adam (the same lr, betas and eps, weight_decay 0, its state set to the moments
after step T-1), once at step 1 from zero moments with the defaults and once at step 5 with other
values for all four. The update w_new - w_old within 1e-9 x max|update| (float64 both: the rounding
of w, about 1e-16 |w|, is 1e-14 of an update of 0.01 |w|), m and v within 1e-9 x their max: a missing bias correction moves the update by
a factor 1 / (1 - beta^t), a beta swapped or mistyped moves m or v by the gradient's own size.

Usage: roundtrip.py [--shardlab build/bin/shardlab] [--keep DIR] [layer ...]
Exit 0: every comparison agreed; 1: one did not (each printed); 2: shardlab refused or failed.
"""
import argparse
import math
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


def shardlab_run(name, cmd):
    """Runs shardlab; its one-line verdict, or exit 2 for the whole round trip when it did not pass."""
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{name}: {' '.join(cmd)} exited {run.returncode}: {run.stdout.strip()} {run.stderr.strip()}")
        sys.exit(2)
    return run.stdout.strip()


def moe_torch(x, W_router, W_in, W_out, dy, top_k, factor, groups):
    """The MoE from its definition: gating, capacity per group, combine; gradients by autograd."""
    T, E = x.shape[0], W_router.shape[1]
    logits = x @ W_router
    probs = torch.softmax(logits, dim=-1)
    top, experts = torch.topk(probs, top_k, dim=-1)
    gates = top / top.sum(dim=-1, keepdim=True)
    capacity = max(1, math.ceil(factor * top_k * (T // groups) / E - 1e-9))
    # Assignments in group order: token after token, choice after choice.
    one_hot = torch.nn.functional.one_hot(experts, E).reshape(groups, T // groups * top_k, E)
    place = ((one_hot.cumsum(dim=1) - 1) * one_hot).sum(dim=-1).reshape(T, top_k)
    keep = place < capacity
    y_all = torch.einsum("teh,ehm->tem", torch.relu(torch.einsum("tm,emh->teh", x, W_in)), W_out)
    y = y_all[torch.arange(T)[:, None], experts]
    out = ((gates * keep)[..., None] * y).sum(dim=1)
    (out * dy).sum().backward()
    kept = (one_hot * keep.reshape(groups, -1, 1)).sum(dim=1)
    exact = {"experts": experts, "slot": torch.where(keep, place, torch.full_like(place, -1)),
             "kept": kept, "routed": one_hot.sum(dim=1), "capacity": torch.tensor([capacity])}
    return {"logits": logits, "gates": gates, "out": out}, exact


def run_moe(shardlab, work, dtype):
    T, m, E, h, top_k, factor, groups = 64, 8, 4, 16, 2, 1.0, 4
    rng = np.random.default_rng(20)
    inputs = {"x": rng.standard_normal((T, m)), "W_router": rng.standard_normal((m, E)),
              "W_in": rng.standard_normal((E, m, h)) / np.sqrt(m), "W_out": rng.standard_normal((E, h, m)) / np.sqrt(h),
              "dy": rng.standard_normal((T, m))}
    inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
    w_path, out_path = os.path.join(work, "moe_in.npz"), os.path.join(work, f"moe_{dtype}_out.npz")
    np.savez(w_path, **inputs)
    verdict = shardlab_run("moe", [shardlab, "moe", "--inputs", w_path, "--save", out_path, "--mesh", "X=2,Y=2",
                                   "--top-k", str(top_k), "--capacity-factor", str(factor), "--dtype", dtype, "--quiet"])
    saved = np.load(out_path)
    leaves = {k: torch.tensor(v.astype(np.float64), requires_grad=k != "dy") for k, v in inputs.items()}
    values, exact = moe_torch(**leaves, top_k=top_k, factor=factor, groups=groups)
    for k in ("x", "W_router", "W_in", "W_out"):
        values["d" + k] = leaves[k].grad
    ok, worst = True, []
    for k, want in values.items():
        ok &= check(k, saved[k], want.detach().numpy(), TOL[dtype], worst)
    for k, want in exact.items():
        ok &= check(k, saved[k], want.numpy().astype(np.float64), 0, worst)
    ok &= check("dy", saved["dy"], inputs["dy"].astype(np.float64), 0, worst)
    dropped = int(exact["routed"].sum() - exact["kept"].sum())
    share, label = max(worst)
    print(f"{'ok  ' if ok else 'FAIL'} {'moe':<11} {dtype}: {len(values)} tensors within {TOL[dtype]:g} x max|torch|, "
          f"{len(exact) + 1} exactly ({dropped} of {T * top_k} choices dropped); closest {label} at {share:.2g} of it  "
          f"[{verdict}]")
    return ok


def run_adam(shardlab, work, step, options):
    """One step of torch.optim.Adam against shardlab adam's, from the same parameters and moments."""
    rng = np.random.default_rng(15 + step)
    shapes = {"W": (8, 16), "b": (16,)}
    inputs = {}
    for name, shape in shapes.items():
        inputs[name] = rng.standard_normal(shape)
        inputs["d" + name] = rng.standard_normal(shape)
        if step > 1:  # moments as after step - 1 steps: v of the size of g^2, m of g
            inputs["m/" + name] = 0.3 * rng.standard_normal(shape)
            inputs["v/" + name] = 0.5 * rng.standard_normal(shape) ** 2 + 0.01
    w_path, out_path = os.path.join(work, f"adam{step}_in.npz"), os.path.join(work, f"adam{step}_out.npz")
    np.savez(w_path, **inputs)
    flags = [f"--{k}={v!r}" for k, v in options.items()]
    verdict = shardlab_run("adam", [shardlab, "adam", "--inputs", w_path, "--step", str(step), *flags,
                                    "--save", out_path, "--quiet"])
    saved = np.load(out_path)
    params = {name: torch.tensor(inputs[name], requires_grad=True) for name in shapes}
    opt = torch.optim.Adam(params.values(), lr=options.get("lr", 0.01), eps=options.get("eps", 1e-8),
                           betas=(options.get("beta1", 0.9), options.get("beta2", 0.999)), weight_decay=0)
    for name, p in params.items():
        p.grad = torch.tensor(inputs["d" + name])
        if step > 1:
            opt.state[p] = {"step": torch.tensor(float(step - 1)), "exp_avg": torch.tensor(inputs["m/" + name]),
                            "exp_avg_sq": torch.tensor(inputs["v/" + name])}
    opt.step()
    ok, worst = True, []
    for name, p in params.items():
        state = opt.state[p]
        ok &= check("update of " + name, saved[name] - inputs[name], p.detach().numpy() - inputs[name], 1e-9, worst)
        ok &= check("m/" + name, saved["m/" + name], state["exp_avg"].numpy(), 1e-9, worst)
        ok &= check("v/" + name, saved["v/" + name], state["exp_avg_sq"].numpy(), 1e-9, worst)
    share, label = max(worst)
    said = ", ".join(f"{k} {v:g}" for k, v in options.items()) or "the defaults"
    print(f"{'ok  ' if ok else 'FAIL'} {'adam':<11} step {step} ({said}): {len(worst)} tensors within 1e-9 x "
          f"max|torch|; closest {label} at {share:.2g}  [{verdict}]")
    return ok


# Beside the layers: name -> what it runs (each in both element types for moe).
OTHERS = {
    "moe": lambda shardlab, work: [run_moe(shardlab, work, dtype) for dtype in ("float64", "float32")],
    "adam": lambda shardlab, work: [run_adam(shardlab, work, 1, {}),
                                    run_adam(shardlab, work, 5, {"lr": 0.003, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6})],
}


def run_layer(name, shardlab, work, dtype):
    case, fn, shapes = LAYERS[name]
    inputs = weights(shapes, seed=len(name))
    y_shape = shapes["x"]
    inputs["dy"] = np.random.default_rng(99).standard_normal(y_shape).astype(np.float32)
    w_path, out_path = os.path.join(work, f"{name}_w.npz"), os.path.join(work, f"{name}_{dtype}_out.npz")
    np.savez(w_path, **inputs)
    cmd = [shardlab, "run", os.path.join(ROOT, case), "--inputs", w_path, "--save", out_path, "--dtype", dtype, "--quiet"]
    verdict = shardlab_run(name, cmd)
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
          f"within {TOL[dtype]:g} x max|torch|; closest {label} at {share:.2g} of it  [{verdict}]")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shardlab", default=os.path.join(ROOT, "build/bin/shardlab"))
    parser.add_argument("--keep", help="write the .npz files here instead of a temporary folder")
    names = list(LAYERS) + list(OTHERS)
    parser.add_argument("layers", nargs="*", default=names, help="of " + ", ".join(names) + " (default: all)")
    args = parser.parse_args()
    for name in args.layers:
        if name not in names:
            parser.error(f"no layer '{name}'; give any of {', '.join(names)}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        results = []
        for name in args.layers:
            if name in OTHERS:
                results += OTHERS[name](args.shardlab, work)
            else:
                results += [run_layer(name, args.shardlab, work, dtype) for dtype in ("float64", "float32")]
        ok = all(results)
    print("PASS: shardlab agrees with PyTorch (autograd, torch.optim.Adam)" if ok
          else "FAIL: shardlab differs from PyTorch (autograd, torch.optim.Adam)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
