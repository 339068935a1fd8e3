"""torch.distributed's gloo backend: AllReduce busbw on the sizes Trident's collectives bench
uses, for the side-by-side comparison in collectives/peers/compare.py.

    python3 gloo_allreduce.py --world-size 2 --min-bytes 1048576 --max-bytes 268435456

Prints nccl-tests' columns for rank 0: size, count, time (us), algbw and busbw (GB/s), with
busbw = algbw * 2 (n - 1) / n.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    n = args.world_size
    size = args.min_bytes
    if rank == 0:
        print(f"{'size':>12} {'count':>12} {'time(us)':>10} {'algbw':>8} {'busbw':>8}", flush=True)
    while size <= args.max_bytes:
        buf = torch.ones(size // 4, dtype=torch.float32)
        iters = max(3, min(args.iters, (1 << 30) // size))
        for _ in range(2):
            dist.all_reduce(buf)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        dt = (time.perf_counter() - start) / iters
        if rank == 0:
            algbw = size / dt / 1e9
            print(f"{size:>12} {size // 4:>12} {dt * 1e6:>10.1f} {algbw:>8.2f} {algbw * 2 * (n - 1) / n:>8.2f}", flush=True)
        size *= 2
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.world_size)


if __name__ == "__main__":
    main()
