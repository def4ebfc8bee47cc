#!/usr/bin/env python3
"""One probe of the watch daemon's latency for any SnapThumb build (docs/performance.md).

A twin of `snapthumb bench --watch-latency` that does not depend on the build being measured,
so that two builds (say, the thread-based daemon and the runner) are measured by the same
code. It starts `<snapthumb> watch`, renames N copies of the images into incoming/ at RATE per
second, and takes the moment each manifest appears from inotify (IN_MOVED_TO on
store/manifests) instead of polling. It prints p50/p95/p99/max and the slowest uploads by
index (0 is the first sent), which shows whether a tail is the start of a run or its middle.

usage: Benchmarks/watch-latency.py SNAPTHUMB IMAGE_DIR [--files 500] [--rate 50] [--jobs 2]
           [--temp-dir .] [--sync] [--settle-seconds 0.5]
--sync writes the staged copies back (syncfs) before the daemon starts, as bench does.
Run it under the measurement lock on a shared host: flock /work/notes/measure.lock ...
"""
import argparse, ctypes, math, os, select, shutil, struct, subprocess, sys, tempfile, threading, time

IN_MOVED_TO, IN_CREATE = 0x80, 0x100

parser = argparse.ArgumentParser()
parser.add_argument("snapthumb")
parser.add_argument("images")
parser.add_argument("--files", type=int, default=500)
parser.add_argument("--rate", type=float, default=50)
parser.add_argument("--jobs", type=int, default=2)
parser.add_argument("--temp-dir", default=".")
parser.add_argument("--sync", action="store_true")
parser.add_argument("--settle-seconds", type=float, default=0.5)
args = parser.parse_args()

libc = ctypes.CDLL("libc.so.6", use_errno=True)
images = sorted(f for f in os.listdir(args.images) if not f.startswith("."))[:50]
if not images:
    sys.exit(f"no images in {args.images}")
root = tempfile.mkdtemp(prefix="snapthumb-watch-latency-", dir=args.temp_dir)
try:
    up, store, stage = f"{root}/uploads", f"{root}/store", f"{root}/stage"
    os.makedirs(f"{up}/incoming")
    os.makedirs(stage)
    names = []
    for i in range(args.files):
        source = images[i % len(images)]
        name = f"lat-{i:05d}{os.path.splitext(source)[1] or '.jpg'}"
        shutil.copyfile(f"{args.images}/{source}", f"{stage}/{name}")
        names.append(name)
    if args.sync:
        fd = os.open(root, os.O_RDONLY)
        libc.syncfs(fd)
        os.close(fd)

    daemon = subprocess.Popen([args.snapthumb, "watch", up, "--store", store, "--jobs", str(args.jobs),
                               "--log-level", "error"], stdout=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not (os.path.exists(f"{up}/processing") and os.path.exists(f"{store}/manifests")):
        if time.time() > deadline or daemon.poll() is not None:
            sys.exit("the watch daemon did not start")
        time.sleep(0.02)
    time.sleep(args.settle_seconds)

    inotify = libc.inotify_init1(os.O_NONBLOCK)
    if libc.inotify_add_watch(inotify, f"{store}/manifests".encode(), IN_MOVED_TO | IN_CREATE) < 0:
        sys.exit("inotify_add_watch failed")
    index = {f"{name}.json": i for i, name in enumerate(names)}
    sent, seen = [None] * len(names), {}
    give_up = time.monotonic() + len(names) / args.rate + 60

    def read_events():
        while len(seen) < len(names) and time.monotonic() < give_up:
            ready, _, _ = select.select([inotify], [], [], 1.0)
            now = time.monotonic()
            if not ready:
                continue
            data, offset = os.read(inotify, 65536), 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16: offset + 16 + length].rstrip(b"\0").decode()
                offset += 16 + length
                if name in index and index[name] not in seen:
                    seen[index[name]] = now

    reader = threading.Thread(target=read_events)
    reader.start()
    start = time.monotonic()
    for i, name in enumerate(names):
        wait = start + i / args.rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        os.rename(f"{stage}/{name}", f"{up}/incoming/{name}")
        sent[i] = time.monotonic()
    reader.join()
    daemon.terminate()
    daemon.wait()

    latency = {i: (t - sent[i]) * 1000 for i, t in seen.items()}
    ordered = sorted(latency.values())
    def percentile(p):
        return ordered[min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1)] if ordered else 0
    print(f"watch latency, {len(names)} uploads at {args.rate:g}/s, --jobs {args.jobs}: p50 {percentile(.5):.1f} ms, "
          f"p95 {percentile(.95):.1f} ms, p99 {percentile(.99):.1f} ms, max {ordered[-1] if ordered else 0:.1f} ms, "
          f"missing {len(names) - len(ordered)}")
    slowest = sorted(latency.items(), key=lambda item: -item[1])[:10]
    print("slowest (upload: ms): " + ", ".join(f"{i}: {ms:.1f}" for i, ms in slowest))
    sys.exit(1 if len(ordered) < len(names) else 0)
finally:
    shutil.rmtree(root, ignore_errors=True)
