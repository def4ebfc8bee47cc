#!/usr/bin/env python3
"""Bucket-store latency benchmark: does a round trip to the store serialise the pipeline?

    .venv-moto/bin/python Benchmarks/s3-latency.py [--corpus DIR] [--jobs N]
        [--latency-ms 20] [--rounds 3] [--binary .build/release/snapthumb]

Starts moto's S3 server on 127.0.0.1 (auth mode, Scripts/moto-server.py) and two
fault proxies in front of it (Scripts/fault-proxy.py): one adding nothing, one
adding --latency-ms to every request. Each round backfills the same corpus into
a fresh prefix through each proxy, alternating which goes first, at the same
--jobs, and reports images/s, the ratio (target >= 0.80) and the requests per
image the proxy counted (target <= 5 on a fresh backfill). Run Scripts/moto.sh
first; the corpus defaults to .corpus/snaps (Scripts/make-corpus.sh), else Samples/snaps.
Exit status 1 when the ratio of medians misses the target.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def helper(args):
    proc = subprocess.Popen([sys.executable] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    return proc, line


def main():
    parser = argparse.ArgumentParser()
    default_corpus = os.path.join(ROOT, ".corpus", "snaps")
    if not os.path.isdir(default_corpus):
        default_corpus = os.path.join(ROOT, "Samples", "snaps")
    parser.add_argument("--corpus", default=default_corpus)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    release = os.path.join(ROOT, ".build", "release", "snapthumb")
    parser.add_argument("--binary", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "snapthumb"))
    parser.add_argument("--target", type=float, default=0.80)
    args = parser.parse_args()

    files = sum(len(names) for _, _, names in os.walk(args.corpus))
    moto, line = helper([os.path.join(ROOT, "Scripts", "moto-server.py"), "--bucket", "bench"])
    info = json.loads(line)
    stats_dir = tempfile.mkdtemp(prefix="snapthumb-s3-bench-")
    proxies = {}
    try:
        for name, latency in (("0 ms", 0), (f"{args.latency_ms:g} ms", args.latency_ms)):
            stats = os.path.join(stats_dir, f"{latency}.json")
            proc, port_line = helper([os.path.join(ROOT, "Scripts", "fault-proxy.py"), "--upstream", f"127.0.0.1:{info['port']}",
                                      "--latency-ms", str(latency), "--stats", stats])
            proxies[name] = (proc, "http://127.0.0.1:" + port_line.split()[1], stats)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=info["access_key_id"], AWS_SECRET_ACCESS_KEY=info["secret_access_key"],
                   AWS_REGION="us-east-1")
        env.pop("AWS_SESSION_TOKEN", None)
        rates = {name: [] for name in proxies}
        per_image = {name: [] for name in proxies}
        print(f"corpus {args.corpus}: {files} files, --jobs {args.jobs}, {args.rounds} round(s), binary {args.binary}")
        for round_ in range(args.rounds):
            order = list(proxies) if round_ % 2 == 0 else list(reversed(proxies))
            for name in order:
                _, endpoint, stats = proxies[name]
                before = json.load(open(stats))["requests"] if os.path.exists(stats) else 0
                prefix = f"s3://bench/r{round_}-{name.replace(' ', '')}"
                started = time.monotonic()
                result = subprocess.run([args.binary, "backfill", args.corpus, "--store", prefix, "--jobs", str(args.jobs),
                                         "--progress-interval", "3600"],
                                        env=dict(env, AWS_ENDPOINT_URL_S3=endpoint), capture_output=True, text=True)
                seconds = time.monotonic() - started
                if result.returncode != 0:
                    print(result.stderr, file=sys.stderr)
                    return 2
                requests = json.load(open(stats))["requests"] - before
                rates[name].append(files / seconds)
                per_image[name].append(requests / files)
                print(f"  round {round_ + 1} {name:>6}: {files / seconds:7.1f} images/s, {requests / files:.2f} requests/image (start-up included)")
        names = list(proxies)
        base, slow = (statistics.median(rates[n]) for n in names)
        ratio = slow / base
        print()
        print(f"| proxy | images/s (median) | requests/image |")
        print(f"|---|---|---|")
        for n in names:
            print(f"| {n} | {statistics.median(rates[n]):.1f} | {statistics.median(per_image[n]):.2f} |")
        print()
        print(f"ratio {names[1]} / {names[0]}: {ratio:.2f} (target >= {args.target:.2f}): {'met' if ratio >= args.target else 'MISSED'}")
        return 0 if ratio >= args.target else 1
    finally:
        for proc, _, _ in proxies.values():
            proc.stdin.close()
            proc.wait()
        moto.stdin.close()
        moto.wait()


if __name__ == "__main__":
    sys.exit(main())
