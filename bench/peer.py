#!/usr/bin/python3
"""make bench-peer: shardlab beside PyTorch on the same layer and the same collectives.

The layer is the Megatron MLP, pairwise on 2 devices (W_in split by columns, W_out by rows, one
AllReduce forward and one backward), forward and backward, float32, one BLAS thread per device,
with shardlab's input distribution (integers -2..2, the weights divided by 8; dy likewise):
  A  shardlab bench ffn --strategy pairwise --mesh Y=2 --backward --steps N  (2 device threads)
  B  PyTorch + gloo: 2 processes, autograd, Megatron's copy-to / reduce-from functions
run alternately A B A B, the load average printed before each. It prints the median ratio of
the warm step times and of the peak memory: per MPI rank (mpiexec -n 2 shardlab ffn --backend
mpi) over per PyTorch process. Then the collectives from 1 to 64 MiB: shardlab's sim ring,
shardlab's MPI ring and MPICH's own, and gloo's. PyTorch's OpenBLAS is given the kernel set
shardlab's OpenBLAS uses (Debian's torch otherwise may pick Prescott kernels, 5x slower).

Without python3-torch it prints one line saying so and exits 0. A comparison dependency only:
not in the Makefile's PACKAGES (apt-get install -y --no-install-recommends python3-torch).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


# ---- parsing (checked by --self-test) ----

def parse_dims(text):
    """'B=8,S=512,M=1024,H=4096' -> {'B': 8, ...}; every one of B, S, M, H, positive."""
    dims = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name = name.strip().upper()
        if not eq or name not in "BSMH" or len(name) != 1 or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"--dims {text!r}: give B=..,S=..,M=..,H=.. with positive integers")
        dims[name] = int(value)
    if sorted(dims) != sorted("BSMH"):
        raise ValueError(f"--dims {text!r}: give all of B, S, M and H")
    if dims["H"] % 2:
        raise ValueError(f"--dims {text!r}: H must be even (split over 2 devices)")
    return dims


def dims_text(d):
    return f"B={d['B']},S={d['S']},M={d['M']},H={d['H']}"


def kernels_of(description):
    """The OpenBLAS kernel set in shardlab's BLAS description: '... (kernels: Haswell, ...' -> 'Haswell'."""
    m = re.search(r"\(kernels: ([A-Za-z0-9_]+)", description or "")
    return m.group(1) if m else None


def collectives_csv(text):
    """shardlab bench collectives --csv: {(op, bytes): (ours_us, native_us or None)}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        f = line.split(",")
        if len(f) < 8 or not f[1].isdigit():
            continue
        native = None if f[7] == "-" else float(f[7])
        out[(f[0], int(f[1]))] = (float(f[3]), native)
    return out


def peak_kib_lines(text):
    """The 'peak_kib N' lines /usr/bin/time -f writes, one per MPI rank, in KiB."""
    return [int(v) for v in re.findall(r"^peak_kib (\d+)$", text, re.M)]


def self_test():
    assert parse_dims("B=8,S=512,M=1024,H=4096") == {"B": 8, "S": 512, "M": 1024, "H": 4096}
    for bad in ["B=8,S=512,M=1024", "B=8,S=0,M=1,H=2", "B=8,S=x,M=1,H=2", "B=1,S=1,M=1,H=3", "Q=1,S=1,M=1,H=2"]:
        try:
            parse_dims(bad)
        except ValueError:
            continue
        raise AssertionError(f"parse_dims accepted {bad}")
    assert kernels_of("OpenBLAS 0.3.21 DYNAMIC_ARCH Zen (kernels: Zen, chosen by OpenBLAS)") == "Zen"
    assert kernels_of("no kernels here") is None
    csv = "# c\nall_reduce,1048576,262144,22.5,1,1,0,-,-,-,-,-\nall_gather,4194304,1,7.0,1,1,0,3.5,1,1,0,2\n"
    assert collectives_csv(csv) == {("all_reduce", MIB): (22.5, None), ("all_gather", 4 * MIB): (7.0, 3.5)}
    assert peak_kib_lines("x\npeak_kib 120\npeak_kib 99\n") == [120, 99]
    assert statistics.median([3.0, 1.0, 2.0]) == 2.0
    print("bench peer self-test: 12 checks passed")


# ---- the machine ----

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def load_text():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the PyTorch side: two worker processes of this script ----

def worker(args):
    import resource
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=2)
    out = {"rank": args.rank}
    if args.worker == "layer":
        out["step_seconds"], out["step_cpu_seconds"] = torch_layer(torch, dist, parse_dims(args.dims), args.steps,
                                                                  args.rank)
    else:
        out["collectives_us"] = torch_collectives(torch, dist, args.iters)
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    dist.destroy_process_group()
    print(json.dumps(out))


def torch_layer(torch, dist, d, steps, rank):
    """Wall and process CPU seconds of each step, the first (cold) then `steps` warm ones."""
    class CopyToParallel(torch.autograd.Function):  # Megatron's f: identity forward, AllReduce backward
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            dist.all_reduce(g)
            return g

    class ReduceFromParallel(torch.autograd.Function):  # Megatron's g: AllReduce forward, identity backward
        @staticmethod
        def forward(ctx, y):
            y = y.clone()
            dist.all_reduce(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g

    gen = torch.Generator().manual_seed(1)

    def ints(*shape, scale=1.0):
        return torch.randint(-2, 3, shape, generator=gen).to(torch.float32) * scale

    half = d["H"] // 2
    cols = slice(rank * half, (rank + 1) * half)
    x = ints(d["B"], d["S"], d["M"]).requires_grad_()
    w_in = ints(d["M"], d["H"], scale=1 / 8)[:, cols].contiguous().requires_grad_()
    w_out = ints(d["H"], d["M"], scale=1 / 8)[cols, :].contiguous().requires_grad_()
    dy = ints(d["B"], d["S"], d["M"])
    times, cpu = [], []
    for _ in range(steps + 1):
        for t in (x, w_in, w_out):
            t.grad = None
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        h = CopyToParallel.apply(x) @ w_in
        y = ReduceFromParallel.apply(torch.nn.functional.gelu(h) @ w_out)
        y.backward(dy)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        del h, y
    return times, cpu


def torch_collectives(torch, dist, iters):
    """Median microseconds per call of gloo's all_reduce and all_gather, 1 to 64 MiB (the size is
    the buffer all_reduce sums, and all_gather's gathered result, as shardlab's table has it)."""
    out = {}
    for size in (MIB, 4 * MIB, 16 * MIB, 64 * MIB):
        n = size // 4
        buf = torch.ones(n)
        part = torch.ones(n // 2)
        parts = [torch.empty(n // 2) for _ in range(2)]
        for op in ("all_reduce", "all_gather"):
            times = []
            for i in range(iters + 2):
                dist.barrier()
                t0 = time.perf_counter()
                if op == "all_reduce":
                    dist.all_reduce(buf)
                else:
                    dist.all_gather(parts, part)
                if i >= 2:
                    times.append((time.perf_counter() - t0) * 1e6)
            out[f"{op},{size}"] = statistics.median(times)
    return out


def run_torch(a, kind, coretype, **extra):
    """Both ranks' JSON results of a worker run, or raises with their stderr."""
    port = str(free_port())
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    cmd = shlex.split(a.python) + [os.path.abspath(__file__), "--worker", kind, "--port", port]
    for k, v in extra.items():
        cmd += [f"--{k}", str(v)]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=a.timeout)
        if p.returncode != 0:
            raise RuntimeError(f"PyTorch worker failed (exit {p.returncode}): {err.strip()[-400:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# ---- the shardlab side ----

def run(cmd, a, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def shardlab_layer(a):
    cmd = [a.shardlab, "bench", "ffn", "--strategy", "pairwise", "--mesh", "Y=2", "--backward", "--dtype", "float32",
           "--dims", dims_text(a.dims), "--steps", str(a.steps), "--verify", "sketch", "--json"]
    return json.loads(run(cmd, a, dict(os.environ, OPENBLAS_NUM_THREADS="1")).stdout)


def shardlab_mpi_peaks(a):
    """Peak memory (bytes) of each MPI rank of one sharded run (rank 0 also verifies)."""
    cmd = ["mpiexec", "-n", "2", "/usr/bin/time", "-f", "peak_kib %M", a.shardlab, "ffn", "--strategy", "pairwise",
           "--mesh", "Y=2", "--backward", "--dtype", "float32", "--dims", dims_text(a.dims), "--backend", "mpi",
           "--verify", "sketch", "--json"]
    p = run(cmd, a, dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return [k * 1024 for k in peak_kib_lines(p.stderr)]


def shardlab_collectives(a, mpi):
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "c.csv")
        cmd = [a.shardlab, "bench", "collectives", "--ops", "all_reduce,all_gather", "--min", "1M", "--max", "64M",
               "--iters", str(a.iters), "--csv", csv]
        if mpi:
            cmd = ["mpiexec", "-n", "2"] + cmd + ["--backend", "mpi"]
        run(cmd, a, dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        with open(csv) as f:
            return collectives_csv(f.read())


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  " + "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardlab", default="build/bin/shardlab")
    ap.add_argument("--python", default="/usr/bin/python3", help="the python that runs PyTorch (with flags)")
    ap.add_argument("--dims", default="B=8,S=512,M=1024,H=4096")
    ap.add_argument("--steps", type=int, default=3, help="warm steps timed per run")
    ap.add_argument("--rounds", type=int, default=2, help="A B rounds of the layer")
    ap.add_argument("--iters", type=int, default=10, help="timed calls per collective and size")
    ap.add_argument("--no-collectives", action="store_true")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--worker", choices=["layer", "collectives"], help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.self_test:
        return self_test()
    try:
        a.dims = parse_dims(a.dims)
    except ValueError as e:
        print(f"bench peer: {e}", file=sys.stderr)
        return 2
    if a.steps < 1 or a.rounds < 1 or a.iters < 1:
        print("bench peer: --steps, --rounds and --iters must be at least 1", file=sys.stderr)
        return 2
    if subprocess.run(shlex.split(a.python) + ["-c", "import torch"], capture_output=True).returncode != 0:
        print(f"bench peer: skipped: PyTorch is not importable by {a.python} "
              "(apt-get install -y --no-install-recommends python3-torch)")
        return 0
    if not os.access(a.shardlab, os.X_OK):
        print(f"bench peer: {a.shardlab} is not an executable shardlab (make {a.shardlab})", file=sys.stderr)
        return 2
    try:
        return compare(a)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        print(f"bench peer: {e}", file=sys.stderr)
        return 3


def compare(a):
    print(f"# bench peer: Megatron MLP pairwise on 2 devices, forward + backward, float32, {dims_text(a.dims)}")
    print(f"# CPU: {cpu_model()}, {os.cpu_count()} cores; one BLAS thread per device on both sides")
    sl_steps, pt_steps, sl_cpu, pt_cpu, kernels, pt_peak = [], [], [], [], None, 0
    for r in range(a.rounds):
        print(f"round {r + 1}: A shardlab, {load_text()}", flush=True)
        j = shardlab_layer(a)
        kernels = kernels_of(j.get("kernels"))
        sl_steps += j["step_seconds"]
        sl_cpu += j.get("step_cpu_seconds", [])
        print(f"round {r + 1}: B PyTorch + gloo (OPENBLAS_CORETYPE={kernels}), {load_text()}", flush=True)
        res = run_torch(a, "layer", kernels, dims=dims_text(a.dims), steps=a.steps)
        # A step ends when the slower rank's does.
        pt_steps += [max(s) for s in zip(*(x["step_seconds"][1:] for x in res))]
        pt_cpu += [sum(s) for s in zip(*(x["step_cpu_seconds"][1:] for x in res))]  # both processes
        pt_peak = max([pt_peak] + [x["peak_rss_bytes"] for x in res])
    sl, pt = statistics.median(sl_steps), statistics.median(pt_steps)
    print(f"# OpenBLAS kernels: {kernels} on both sides; {len(sl_steps)} warm steps each, median")
    rows = [["shardlab (sim, 2 device threads)", f"{sl:.3f}", f"{sl / pt:.2f}"],
            ["PyTorch + gloo (2 processes)", f"{pt:.3f}", "1.00"]]
    table(["warm step", "seconds", "/ PyTorch"], rows)
    print(f"step ratio shardlab / PyTorch: {sl / pt:.2f} (median warm step)")
    if sl_cpu and pt_cpu:
        # CPU time, both devices: what each side computes, whatever other jobs take from the cores.
        sc, pc = statistics.median(sl_cpu), statistics.median(pt_cpu)
        print(f"CPU ratio shardlab / PyTorch: {sc / pc:.2f} (median warm step's CPU seconds, both devices: "
              f"{sc:.3f} against {pc:.3f})")
    if not a.no_mpi and shutil.which("mpiexec"):
        peaks = shardlab_mpi_peaks(a)
        print(f"# peak memory: mpiexec -n 2 shardlab ffn --backend mpi per rank (rank 0 also verifies); "
              f"PyTorch per process (the larger); {load_text()}")
        rows = [[f"shardlab MPI rank {i}", f"{p / MIB:.0f}", f"{p / pt_peak:.2f}"] for i, p in enumerate(peaks)]
        rows.append(["PyTorch process", f"{pt_peak / MIB:.0f}", "1.00"])
        table(["peak memory", "MiB", "/ PyTorch"], rows)
        if peaks:
            print(f"memory ratio shardlab / PyTorch: {max(peaks) / pt_peak:.2f} (largest rank over largest process)")
    if not a.no_collectives:
        collectives(a, kernels)
    return 0


def collectives(a, kernels):
    print(f"# collectives on 2 devices, float32, median us per call; {load_text()}", flush=True)
    sim = shardlab_collectives(a, mpi=False)
    mpi = shardlab_collectives(a, mpi=True) if not a.no_mpi and shutil.which("mpiexec") else {}
    gloo = run_torch(a, "collectives", kernels, iters=a.iters)
    g = {k: max(r["collectives_us"][k] for r in gloo) for k in gloo[0]["collectives_us"]}
    rows = []
    for op in ("all_reduce", "all_gather"):
        for size in (MIB, 4 * MIB, 16 * MIB, 64 * MIB):
            gl = g[f"{op},{size}"]
            s = sim.get((op, size), (None, None))[0]
            m, n = mpi.get((op, size), (None, None))
            f = lambda v: "-" if v is None else f"{v:.0f}"
            r = lambda v: "-" if v is None else f"{v / gl:.2f}"
            rows.append([op, f"{size // MIB}M", f(gl), f(s), r(s), f(m), r(m), f(n), r(n)])
    table(["collective", "size", "gloo", "sim ring", "/gloo", "MPI ring", "/gloo", "MPICH", "/gloo"], rows)
    print(f"collectives: {load_text()}")


if __name__ == "__main__":
    sys.exit(main())
