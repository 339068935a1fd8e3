"""Fault-injection soak of Trident's checkpoints: saves killed at a random point, checkpoint
files corrupted (bit flips, truncation), and, where a small tmpfs can be mounted (root), a save
onto a full file system. Reports how many runs held:

- after every SIGKILL, the latest complete checkpoint loads (`trident sample --load`);
- no temporary of a dead process survives the next run's first save;
- every corrupted copy of a checkpoint is refused, naming the damaged file, with a message that
  says it is corrupt (or cut short, or edited);
- a full disk is reported as one, and the checkpoints saved before it still load.

    python3 scripts/soak_checkpoints.py [--trident PATH] [--runs N] [--corruptions N] [--time-limit S]

Every child runs under a timeout; the whole soak stops starting new runs after --time-limit.
Exits 1 when any run did not hold.
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SHAPE = ["--num-layers", "2", "--hidden-size", "128", "--num-attention-heads", "4", "--seq-length", "13"]
TEMPORARY = re.compile(r"^\.(.+)\.(tmp|old)-(.+)$")
REFUSAL = re.compile(r"corrupt|cut short|edited|invalid JSON|older Trident")


def tag_pid(tag):
    """The pid in a temporary's tag: HOST-PID-START, or a bare PID."""
    parts = tag.rsplit("-", 2)
    return int(parts[-2] if len(parts) == 3 else parts[-1])


def temporaries(d):
    return [n for n in os.listdir(d) if TEMPORARY.match(n)] if os.path.isdir(d) else []


def checkpoints(d):
    if not os.path.isdir(d):
        return []
    return sorted(n for n in os.listdir(d) if n.startswith("step_") and os.path.isfile(os.path.join(d, n, "trainer.json")))


def loads(trident, path, timeout):
    """(exit code, stderr) of loading a checkpoint directory with `trident sample`."""
    argv = [trident, "sample", "--load", path, "--device", "cpu", "--max-new-tokens", "1", "--num-problems", "1"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out"


def corrupt(src, dst, rng):
    """Copies checkpoint `src` to `dst` and damages one file of it; returns what it did."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    name = rng.choice(sorted(os.listdir(dst)))
    path = os.path.join(dst, name)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if rng.random() < 0.7:
            at = rng.randrange(size)
            f.seek(at)
            byte = f.read(1)[0]
            bit = rng.randrange(8)
            f.seek(at)
            f.write(bytes([byte ^ (1 << bit)]))
            what = f"bit {bit} of byte {at}/{size}"
        else:
            keep = rng.randrange(size)
            f.truncate(keep)
            what = f"truncated to {keep}/{size} bytes"
    return name, what


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "target", "debug", "trident")
    ap.add_argument("--trident", default=os.environ.get("TRIDENT", default))
    ap.add_argument("--runs", type=int, default=12, help="training runs killed at a random point")
    ap.add_argument("--corruptions", type=int, default=40, help="corrupted copies to load")
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds; no new run starts after")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    trident = os.path.abspath(args.trident)
    deadline = time.monotonic() + args.time_limit
    work = tempfile.mkdtemp(prefix="trident-soak-")
    save = os.path.join(work, "ck")
    print(f"soak: {trident}, seed {args.seed}, work directory {work}")
    failures = []
    counts = {"kills": 0, "mid_save": 0, "kill_loads": 0, "leak_checks": 0, "leak_clean": 0,
              "corruptions": 0, "refused": 0, "disk_full": None}

    # 1. Saves killed at a random point: a save every step; half the runs killed after a random
    # delay, half within milliseconds of a save's start.
    previous_pid = None
    for run in range(args.runs):
        if time.monotonic() > deadline:
            break
        argv = [trident, "train", "--device", "cpu", *SHAPE, "--micro-batch-size", "16",
                "--train-iters", "100000", "--save", save, "--save-interval", "1"]
        if checkpoints(save):
            argv += ["--load", save]
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # Wait for the first checkpoint (at most 60 s), then kill at a random point after it.
        first = time.monotonic()
        before = set(checkpoints(save))
        while time.monotonic() - first < 60 and child.poll() is None and set(checkpoints(save)) == before:
            time.sleep(0.02)
        if rng.random() < 0.5:
            # At a random point of the run.
            time.sleep(rng.uniform(0.0, 1.5))
        else:
            # Inside a save: once its temporary appears, within the next few milliseconds.
            seen = time.monotonic()
            while time.monotonic() - seen < 30 and child.poll() is None and not any(
                    tag_pid(TEMPORARY.match(n).group(3)) == child.pid for n in temporaries(save)):
                time.sleep(0.001)
            time.sleep(rng.uniform(0.0, 0.02))
        if child.poll() is not None:
            failures.append(f"run {run}: trident exited early ({child.returncode}): {child.stderr.read()[-400:]}")
            continue
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        counts["kills"] += 1
        # Temporaries of the run before this one must be gone: this run's first save cleaned them.
        if previous_pid is not None:
            counts["leak_checks"] += 1
            stale = [n for n in temporaries(work) + temporaries(save)
                     if tag_pid(TEMPORARY.match(n).group(3)) == previous_pid]
            if stale:
                failures.append(f"run {run}: temporaries of the dead pid {previous_pid} survived: {stale}")
            else:
                counts["leak_clean"] += 1
        previous_pid = child.pid
        if any(tag_pid(TEMPORARY.match(n).group(3)) == child.pid for n in temporaries(save)):
            counts["mid_save"] += 1
        latest = checkpoints(save)
        if not latest:
            failures.append(f"run {run}: no complete checkpoint after the kill")
            continue
        code, err = loads(trident, save, 120)
        if code == 0:
            counts["kill_loads"] += 1
        else:
            failures.append(f"run {run}: the latest checkpoint {latest[-1]} does not load: {err.strip()[-400:]}")
        # Keep the directory small: the newest two checkpoints.
        for old in checkpoints(save)[:-2]:
            shutil.rmtree(os.path.join(save, old))

    # 2. Corrupted copies of the latest checkpoint.
    latest = checkpoints(save)
    if latest:
        src = os.path.join(save, latest[-1])
        for i in range(args.corruptions):
            if time.monotonic() > deadline:
                break
            dst = os.path.join(work, "corrupt")
            name, what = corrupt(src, dst, rng)
            counts["corruptions"] += 1
            code, err = loads(trident, dst, 120)
            if code == 0:
                failures.append(f"corruption {i}: {name} {what} was accepted")
            elif code is None or not REFUSAL.search(err) or name not in err:
                failures.append(f"corruption {i}: {name} {what}: wrong message: {err.strip()[-400:]}")
            else:
                counts["refused"] += 1

    # 3. A full file system (an 8 MiB tmpfs: room for one checkpoint of this shape, not two).
    mnt = os.path.join(work, "small")
    os.makedirs(mnt)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt], capture_output=True).returncode == 0
    if mounted:
        try:
            d = os.path.join(mnt, "ck")
            argv = [trident, "train", "--device", "cpu", *SHAPE, "--micro-batch-size", "16",
                    "--train-iters", "50", "--save", d, "--save-interval", "1"]
            p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            saved = checkpoints(d)
            ok = (p.returncode != 0 and "no space left" in p.stderr and "is not a valid" not in p.stderr
                  and saved and loads(trident, d, 120)[0] == 0 and not temporaries(d))
            counts["disk_full"] = bool(ok)
            if not ok:
                failures.append(f"full disk: exit {p.returncode}, {len(saved)} checkpoints, "
                                f"temporaries {temporaries(d)}: {p.stderr.strip()[-400:]}")
        finally:
            subprocess.run(["umount", mnt])

    print(f"killed runs: {counts['kill_loads']}/{counts['kills']} left a latest checkpoint that loads "
          f"({counts['mid_save']} killed mid-save, leaving a temporary)")
    print(f"temporaries of dead processes cleaned by the next save: {counts['leak_clean']}/{counts['leak_checks']}")
    print(f"corrupted checkpoints refused naming the file: {counts['refused']}/{counts['corruptions']}")
    if counts["disk_full"] is None:
        print("full disk: not tried (no tmpfs could be mounted; needs root)")
    else:
        print(f"full disk reported as such, earlier checkpoints intact: {'yes' if counts['disk_full'] else 'NO'}")
    for f in failures:
        print("FAILED:", f)
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
