"""Open MPI's MPI_Allreduce through mpi4py: AllReduce busbw on the sizes Trident's collectives
bench uses, for the side-by-side comparison in collectives/peers/compare.py.

    mpirun -np 2 python3 mpi4py_allreduce.py --min-bytes 1048576 --max-bytes 268435456

Prints nccl-tests' columns for rank 0: size, count, time (us), algbw and busbw (GB/s), with
busbw = algbw * 2 (n - 1) / n; the time is the slowest rank's.
"""

import argparse
import time

import numpy as np
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        print(f"{'size':>12} {'count':>12} {'time(us)':>10} {'algbw':>8} {'busbw':>8}", flush=True)
    size = args.min_bytes
    while size <= args.max_bytes:
        buf = np.ones(size // 4, dtype=np.float32)
        out = np.empty_like(buf)
        iters = max(3, min(args.iters, (1 << 30) // size))
        for _ in range(2):
            comm.Allreduce(buf, out, op=MPI.SUM)
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(iters):
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        dt = comm.allreduce((time.perf_counter() - start) / iters, op=MPI.MAX)
        if rank == 0:
            algbw = size / dt / 1e9
            print(f"{size:>12} {size // 4:>12} {dt * 1e6:>10.1f} {algbw:>8.2f} {algbw * 2 * (n - 1) / n:>8.2f}", flush=True)
        size *= 2


if __name__ == "__main__":
    main()
