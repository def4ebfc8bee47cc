#!/usr/bin/env python3
"""Starts moto's S3 server on 127.0.0.1 in its auth mode, for tests and benchmarks.

Run with .venv-moto/bin/python (see Scripts/moto.sh). It starts
`moto_server -H 127.0.0.1 -p PORT` on a free port with INITIAL_NO_AUTH_ACTION_COUNT
set, spends those first unauthenticated requests creating an IAM user, an access
key and a policy that allows S3 and SQS, then creates the requested buckets with that key
(signed: from then on every request must carry a valid signature). It prints one
JSON line: {"endpoint", "port", "access_key_id", "secret_access_key", "region"}.
It stops moto when its standard input closes (also when the test that started it dies).
Never listens off loopback.
"""
import json
import os
import socket
import subprocess
import sys
import time
import argparse


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket", action="append", default=[])
    args = parser.parse_args()

    port = free_port()
    env = dict(os.environ)
    # create_user, create_access_key, put_user_policy: then auth is enforced.
    env["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(name, None)
    moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
    server = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    print(json.dumps({"error": "moto_server did not start"}), flush=True)
                    return 1
                time.sleep(0.05)

        import boto3
        from botocore.config import Config
        endpoint = f"http://127.0.0.1:{port}"
        config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="snapthumb")
        key = iam.create_access_key(UserName="snapthumb")["AccessKey"]
        iam.put_user_policy(UserName="snapthumb", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["s3:*", "sqs:*"], "Resource": "*"}],
        }))
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=config,
                          aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
        for bucket in args.bucket:
            s3.create_bucket(Bucket=bucket)
        print(json.dumps({"endpoint": endpoint, "port": port, "region": "us-east-1",
                          "access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}), flush=True)
        sys.stdin.read()
        return 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
