"""Fills a bucket for S11: `python3 s3fill.py ENDPOINT BUCKET LISTING.json THREADS`.

LISTING is a JSON list of [key, path]. The bucket is made first, retried for up to 60 s (SeaweedFS's
S3 gateway answers before its filer and volumes are ready). Files of 64 MiB and more go up with
boto3's upload_file (multipart, boto3's default 8 MiB parts: what `aws s3 cp` would make); smaller
ones with one put_object each, THREADS at once. Credentials and region come from the environment.
Prints the number of objects and bytes put.
"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def main():
    endpoint, bucket, listing, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(listing) as f:
        items = json.load(f)
    s3 = boto3.client("s3", endpoint_url=endpoint,
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                    max_pool_connections=max(10, threads), retries={"max_attempts": 10}))
    deadline = time.time() + 60
    while True:
        try:
            names = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
            if bucket not in names:
                s3.create_bucket(Bucket=bucket)
            break
        except Exception as error:
            # Not ready yet: refused connections and 5xx. A 4xx (a bad name, a wrong key) is final.
            status = getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if time.time() > deadline or 400 <= status < 500:
                raise
            time.sleep(0.3)

    def put(item):
        key, path = item
        size = os.path.getsize(path)
        if size >= 64 << 20:
            s3.upload_file(path, bucket, key)
        else:
            with open(path, "rb") as body:
                s3.put_object(Bucket=bucket, Key=key, Body=body)
        head = s3.head_object(Bucket=bucket, Key=key)
        if head["ContentLength"] != size:
            raise RuntimeError("%s: the store has %d bytes, the file %d" % (key, head["ContentLength"], size))
        return size

    with ThreadPoolExecutor(threads) as pool:
        sizes = list(pool.map(put, items))
    print("%d objects, %d bytes" % (len(sizes), sum(sizes)))


if __name__ == "__main__":
    main()
