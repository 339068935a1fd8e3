#!/usr/bin/env python3
"""Holds COUNT connections open to HOST:PORT, silent, reopening each one that is refused or
closed, until killed: a sustained connection flood from another local process.

    scripts/flood.py HOST PORT COUNT

Prints, every second and when stopped (SIGTERM or SIGINT), how many connections are open,
the most that were open at once, and how many were reopened, on standard error.
"""
import resource
import errno
import selectors
import signal
import socket
import sys
import time


def main():
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want), hard))
    sel = selectors.DefaultSelector()
    live = 0
    peak = 0
    reopened = 0
    last_report = time.monotonic()

    def report():
        print(f"flood: {live} open (at most {peak}), {reopened} reopened", file=sys.stderr, flush=True)

    def stop(_signum, _frame):
        report()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def open_one():
        nonlocal live, peak
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        if s.connect_ex((host, port)) not in (0, errno.EINPROGRESS):
            s.close()
            return
        sel.register(s, selectors.EVENT_READ)
        live += 1
        peak = max(peak, live)

    while True:
        while live < count:
            before = live
            open_one()
            if live == before:
                break  # refused outright (nothing listens yet): retry shortly
        for key, _ in sel.select(timeout=0.01 if live < count else 0.5):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                s.close()
                live -= 1
                reopened += 1
        if live < count:
            time.sleep(0.002)
        now = time.monotonic()
        if now - last_report >= 1.0:
            report()
            last_report = now


if __name__ == "__main__":
    main()
