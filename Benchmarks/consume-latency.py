#!/usr/bin/env python3
"""consume's latency: how long after its PUT an upload's thumbnails are published.

    .venv-moto/bin/python Benchmarks/consume-latency.py [--rate 10] [--seconds 30] [--jobs 2]
        [--binary .build/release/snapthumb] [--target 1.0]

Starts moto (S3 and SQS, signed requests: Scripts/moto-server.py) on 127.0.0.1, makes a
bucket whose ObjectCreated events go to an SQS queue, and runs `snapthumb consume` on that
queue. Then it PUTs a sample snap under a new key --rate times a second for --seconds, and
reads consume's JSON log: each upload's latency is the time of its `processed` line (written
once its manifest is durable in the store bucket) minus the moment its PUT returned. Prints
the count, p50, p90, p99 and the worst; exit status 1 when p99 is over --target seconds, or an
upload never arrives. Run Scripts/moto.sh first (it makes .venv-moto).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=10, help="uploads a second")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    release = os.path.join(ROOT, ".build", "release", "snapthumb")
    parser.add_argument("--binary", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "snapthumb"))
    parser.add_argument("--sample", default=os.path.join(ROOT, "Samples", "snaps", "phone-portrait.jpg"))
    parser.add_argument("--target", type=float, default=1.0, help="p99 in seconds")
    args = parser.parse_args()

    moto = subprocess.Popen([sys.executable, os.path.join(ROOT, "Scripts", "moto-server.py"), "--bucket", "uploads", "--bucket", "thumbs"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(moto.stdout.readline())
    if "error" in info:
        print(info["error"], file=sys.stderr)
        return 2
    import boto3
    from botocore.config import Config
    session = dict(endpoint_url=info["endpoint"], region_name="us-east-1",
                   aws_access_key_id=info["access_key_id"], aws_secret_access_key=info["secret_access_key"])
    s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}), **session)
    sqs = boto3.client("sqs", **session)
    queue = sqs.create_queue(QueueName="snaps", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(Bucket="uploads", NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]})

    env = dict(os.environ, AWS_ACCESS_KEY_ID=info["access_key_id"], AWS_SECRET_ACCESS_KEY=info["secret_access_key"],
               AWS_REGION="us-east-1", AWS_ENDPOINT_URL_S3=info["endpoint"])
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        env.pop(name, None)
    log = tempfile.NamedTemporaryFile(prefix="snapthumb-consume-latency-", suffix=".log", delete=False)
    consumer = subprocess.Popen([args.binary, "consume", queue, "--source", "s3://uploads/in/", "--store", "s3://thumbs/v1",
                                 "--jobs", str(args.jobs), "--log-format", "json"],
                                env=env, stdout=subprocess.DEVNULL, stderr=log)
    body = open(args.sample, "rb").read()
    put_at = {}
    try:
        # Ready once consume logs "consuming" (its start-up checks passed).
        deadline = time.time() + 60
        while time.time() < deadline and b'"msg":"consuming"' not in open(log.name, "rb").read() and consumer.poll() is None:
            time.sleep(0.1)
        count = int(args.rate * args.seconds)
        started = time.monotonic()
        for i in range(count):
            due = started + i / args.rate
            time.sleep(max(0, due - time.monotonic()))
            key = f"{i:05d}.jpg"
            s3.put_object(Bucket="uploads", Key="in/" + key, Body=body + i.to_bytes(4, "big"))
            put_at[key] = time.time()
        # Every upload's `processed` line, or 30 s more.
        done = {}
        deadline = time.time() + 30
        while time.time() < deadline and len(done) < count:
            for line in open(log.name, encoding="utf-8", errors="replace"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                key = entry.get("snap.key")
                if key in put_at and entry.get("snap.result") in ("ok", "repeat") and key not in done:
                    stamp = entry.get("ts")
                    done[key] = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            time.sleep(0.5)
    finally:
        consumer.terminate()
        consumer.wait(timeout=60)
        moto.stdin.close()
        moto.wait(timeout=30)

    latencies = [done[key] - put_at[key] for key in done]
    missing = len(put_at) - len(done)
    if not latencies:
        print(f"no upload was published (log: {log.name})", file=sys.stderr)
        return 1
    p99 = percentile(latencies, 99)
    print(f"consume at {args.rate:g} uploads/s for {args.seconds:g} s, --jobs {args.jobs}, {args.binary}: "
          f"{len(latencies)} published, {missing} missing; latency from PUT to published "
          f"p50 {percentile(latencies, 50):.3f} s, p90 {percentile(latencies, 90):.3f} s, p99 {p99:.3f} s, "
          f"worst {max(latencies):.3f} s, mean {statistics.mean(latencies):.3f} s (log: {log.name})")
    return 0 if missing == 0 and p99 <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
