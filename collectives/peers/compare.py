"""Side by side: Trident's AllReduce (shared memory on ordinary and on registered buffers, and
in-process) against torch.distributed's gloo and Open MPI (through mpi4py), on the same sizes
and world size, in alternating rounds
so that a noisy machine weighs on all of them alike. Prints the median busbw of each per size,
the ratios the collectives issue sets targets for, and memcpy's read+write bandwidth on every
core at once.

    cargo build --release -p trident-collectives
    python3 collectives/peers/compare.py --python target/peer-venv/bin/python --rounds 3

`--python` is an interpreter with torch, numpy and mpi4py (see README.md here); `mpirun` must be
on PATH. Any peer that cannot run is reported and left out.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(text):
    """{size: busbw} from nccl-tests-style lines: size first, busbw last."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and not line.lstrip().startswith("#") and parts[0].isdigit():
            try:
                out[int(parts[0])] = float(parts[-1])
            except ValueError:
                pass
    return out


def run(name, cmd, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"# {name}: could not run: {e}", file=sys.stderr)
        return None
    if p.returncode != 0:
        print(f"# {name}: exit {p.returncode}: {p.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return rows(p.stdout)


def memcpy_read_write(python, cores, mib=64):
    """GB/s of read+write traffic when every core copies its own buffer at once."""
    code = (
        "import numpy as np, time, sys\n"
        f"n = {mib} << 20\n"
        "a = np.ones(n, np.uint8); b = np.zeros(n, np.uint8)\n"
        "np.copyto(b, a); t = time.perf_counter()\n"
        "for _ in range(20): np.copyto(b, a)\n"
        "print(2 * n * 20 / (time.perf_counter() - t) / 1e9)\n"
    )
    procs = [subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(cores)]
    return sum(float(p.communicate()[0]) for p in procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="interpreter with torch, numpy and mpi4py")
    ap.add_argument("--trident", default="target/release/trident-coll")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = str(args.world_size)
    sizes = ["--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes)]
    systems = {
        "trident shm": [args.trident, "bench", "--transport", "shm", "--world-size", n, *sizes],
        "trident shm reg": [
            args.trident, "bench", "--transport", "shm", "--world-size", n, "--registered", "true", *sizes,
        ],
        "trident inproc": [args.trident, "bench", "--transport", "inproc", "--world-size", n, *sizes],
        "gloo": [args.python, os.path.join(HERE, "gloo_allreduce.py"), "--world-size", n, *sizes],
        "open mpi": [
            "mpirun", "--oversubscribe", "-np", n,
            args.python, os.path.join(HERE, "mpi4py_allreduce.py"), *sizes,
        ],
    }
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    results = {name: [] for name in systems}
    for r in range(args.rounds):
        for name, cmd in systems.items():
            got = run(name, cmd, env)
            if got:
                results[name].append(got)
        print(f"# round {r + 1}/{args.rounds} done", file=sys.stderr)
    median = {}
    for name, runs in results.items():
        if runs:
            common = set.intersection(*(set(x) for x in runs))
            median[name] = {s: statistics.median(x[s] for x in runs) for s in common}
    cores = os.cpu_count() or 1
    copy = memcpy_read_write(args.python, cores)
    names = list(median)
    print(f"# AllReduce busbw (GB/s), {n} ranks, median of {args.rounds} alternating rounds")
    print(f"# memcpy read+write on {cores} cores at once: {copy:.1f} GB/s")
    header = f"{'size':>12}" + "".join(f"{k:>16}" for k in names)
    ratios = [
        ("shm/gloo", "trident shm", "gloo"),
        ("shm/mpi", "trident shm", "open mpi"),
        ("reg/gloo", "trident shm reg", "gloo"),
        ("reg/mpi", "trident shm reg", "open mpi"),
    ]
    ratios = [r for r in ratios if r[1] in median and r[2] in median]
    header += "".join(f"{r[0]:>10}" for r in ratios)
    if "trident inproc" in median:
        header += f"{'inproc/memcpy':>15}"
    print(header)
    for s in sorted(set.intersection(*(set(v) for v in median.values()))):
        line = f"{s:>12}" + "".join(f"{median[k][s]:>16.2f}" for k in names)
        line += "".join(f"{median[a][s] / median[b][s]:>10.2f}" for _, a, b in ratios)
        if "trident inproc" in median:
            line += f"{median['trident inproc'][s] / copy:>15.2f}"
        print(line)


if __name__ == "__main__":
    main()
