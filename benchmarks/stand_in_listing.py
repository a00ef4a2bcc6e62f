"""Does a log listing on the benchmarks' S3 stand-in stay flat as the bucket fills? (`--s3 gofakes3`)

    .venv/bin/python benchmarks/stand_in_listing.py [--after 0,1000,20000,50000] [--log 200] [--repeat 50]

One gofakes3 (benchmarks/harness/gofakes3.py: its memory backend with our LIST that stops at the end of
the prefix) holds a `_delta_log/` of `--log` entries, then `--after` data-file keys that sort after it
(as a Delta table's part files do), added step by step. At each size: the median ListObjectsV2 of
`_delta_log/` after its last entry (empty: what delta-rs asks before each commit) and after its tenth
last (ten entries), with their ratio to the emptiest bucket, measured in the same run. gofakes3's own
LIST walked every key after the marker (20.7 ms at 48,689 keys against 1.9 ms at 813). Before timing,
each size checks the answers against the keys it put: the log's keys, page by page with a small
max-keys, and the common prefixes of a `/`-delimited root listing.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Run, add_common, int_list, median, smoke
from benchmarks.harness.endpoints import LOCAL_ENV
from benchmarks.harness.gofakes3 import GoFakeS3
from benchmarks.harness.timing import timed
from s3events.infra import aws

BUCKET = "table"


def put_keys(url: str, keys: list[str]) -> None:
    """Unsigned PUTs on one connection (gofakes3 checks no signatures): quicker than boto3 for 50k keys."""
    connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=60)
    for key in keys:
        connection.request("PUT", f"/{BUCKET}/{key}", body=b"x", headers={"Content-Length": "1"})
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"PUT {key}: HTTP {answer.status}")
    connection.close()


def listed(s3: object, **query: object) -> tuple[list[str], list[str]]:
    """Every key and common prefix of a paginated ListObjectsV2."""
    keys: list[str] = []
    prefixes: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, **query):  # type: ignore[attr-defined]
        keys += [item["Key"] for item in page.get("Contents", [])]
        prefixes += [item["Prefix"] for item in page.get("CommonPrefixes", [])]
    return keys, prefixes


def check(s3: object, log: list[str], after: int) -> None:
    """The wrapper answers what S3 would: a wrong listing is a failed run, not a fast one."""
    assert listed(s3, Prefix="_delta_log/", PaginationConfig={"PageSize": 7})[0] == log
    assert listed(s3, Prefix="_delta_log/", StartAfter=log[-10])[0] == log[-9:]
    assert listed(s3, Prefix="_delta_log/", StartAfter=log[-1])[0] == []
    roots = ["_delta_log/"] + (["part/"] if after else [])
    assert listed(s3, Delimiter="/", PaginationConfig={"PageSize": 1})[1] == roots
    assert listed(s3, Prefix="_delta_log/0000", Delimiter="/")[0] == [
        k for k in log if k.startswith("_delta_log/0000")
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--after", type=int_list, default=[0, 1000, 20_000, 50_000])
    parser.add_argument("--log", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50)
    add_common(parser)
    args = parser.parse_args()
    smoke(args, after=[0, 500], log=30, repeat=5)
    run = Run.start("stand_in_listing", smoke=args.smoke)
    rows = []
    os.environ.update(LOCAL_ENV)
    with GoFakeS3() as server:
        s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=server.url), "s3")
        s3.create_bucket(Bucket=BUCKET)
        log = [f"_delta_log/{v:020d}.json" for v in range(args.log)]
        put_keys(server.url, log)
        have = 0
        for after in sorted(args.after):
            put_keys(server.url, [f"part/{n:06d}-c000.snappy.parquet" for n in range(have, after)])
            have = after
            check(s3, log, after)
            empty = median(
                timed(
                    lambda: s3.list_objects_v2(Bucket=BUCKET, Prefix="_delta_log/", StartAfter=log[-1]),
                    args.repeat,
                )
            )
            ten = median(
                timed(
                    lambda: s3.list_objects_v2(Bucket=BUCKET, Prefix="_delta_log/", StartAfter=log[-11]),
                    args.repeat,
                )
            )
            rows.append((after, empty * 1000, ten * 1000))
    base = rows[0]
    print("| keys after the log | empty LIST ms | 10-entry LIST ms | empty / first | 10-entry / first |")
    print("|---|---|---|---|---|")
    for after, empty_ms, ten_ms in rows:
        ratios = f"{empty_ms / base[1]:.2f} | {ten_ms / base[2]:.2f}"
        print(f"| {after:,} | {empty_ms:.2f} | {ten_ms:.2f} | {ratios} |")
        figures = {"empty_list_ms": round(empty_ms, 2), "ten_entry_list_ms": round(ten_ms, 2)}
        figures |= {
            "empty_vs_first_x": round(empty_ms / base[1], 2),
            "ten_vs_first_x": round(ten_ms / base[2], 2),
        }
        params = {"keys_after": after, "log_entries": args.log, "repeat": args.repeat}
        run.add(f"{after:,} keys after a {args.log}-entry log", params=params, figures=figures)
    run.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
