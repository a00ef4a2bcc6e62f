"""Hostile input at volume. Malformed messages mixed into good ones: each becomes one quarantine row
with its reason and the good events land. Corrupt and hostile files for ingest (truncated gzip, zstd
bombs, invalid UTF-8, deeply nested JSON, NUL bytes, very long lines, a CSV with very many columns):
each becomes error rows with its reason, or lands when it is valid, and the good files land beside them.

CI runs a small size (one file of each kind). `pytest -m long` runs the issue's sizes: 10,000 good
and 1,000 malformed messages, fed and captured in waves (moto's SQS slows with the queue's depth), and 100
hostile files: many variants of each kind, a 4 GiB zstd bomb, a 2 GiB single line and a CSV of 100,000
columns, both generated as they are uploaded (neither is held in memory nor written to disk)."""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.ingest.files.formats.csv_fields import MAX_CSV_COLUMNS
from s3events.ingest.files.lines import DEFAULT_MAX_LINE_BYTES
from s3events.ingest.service import run_ingest
from tests.conftest import long_run, read_table
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf

LONG = long_run()
# The full size takes longer than the suite's 300 s per test: 10,000 PUTs through moto's notifications
# alone outlast it on a shared 2-vCPU machine.
pytestmark = [pytest.mark.integration, *([pytest.mark.timeout(5400)] if LONG else [])]
GOOD_MESSAGES, BAD_MESSAGES = (10_000, 1_000) if LONG else (150, 48)
# Fed and captured in waves at full size: moto's SQS calls take time in proportion to the queue's depth
# (3 s for one receive at 6,000 messages), so one capture of the whole queue would take hours. Each wave
# puts its share of good and malformed messages in the queue, interleaved, and one capture drains it.
WAVES = 20 if LONG else 1
BOMB_BYTES = (4 << 30) if LONG else (320 << 20)  # zeros, no newline: one line longer than any limit
LONG_LINE_BYTES = (2 << 30) if LONG else (8 << 20)
CSV_COLUMNS = 100_000 if LONG else 2_000
NESTING = 100_000
VARIANTS = 20 if LONG else 1  # files of each small kind (truncated gzip, UTF-8, nesting, NUL; bombs 2 fewer)


# ------------------------------------------------------------------------------------ poison messages


def _bad_messages() -> list[str]:
    """One body per kind of malformed message."""
    return [
        "not json {",
        json.dumps({"Records": "not a list"}),
        json.dumps({"something": "else"}),
        json.dumps({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {}}]}),
        json.dumps({"Type": "Notification", "Message": "not json either"}),
        "[" * NESTING + "]" * NESTING,  # deeper than any JSON parser recurses (and too large)
        "[" * 1020 + "]" * 1020,  # deeper than Python's recursion limit, within the size limit
        json.dumps({"Records": [{"s3": {"object": {"key": "x" * 3000}}}]}),  # over the size limit
    ]


@pytest.mark.long
def test_malformed_messages_mixed_into_good_ones_become_one_quarantine_row_each(make_stack, s3, sqs):
    stack = make_stack()
    kinds = _bad_messages()
    bad = [kinds[n % len(kinds)] for n in range(BAD_MESSAGES)]  # as many of each kind
    good_keys = [f"good/{n}.json" for n in range(GOOD_MESSAGES)]
    sent: dict[str, str] = {}  # message id -> body
    conf = stack.conf(source__message__max__bytes=2048, source__queue__long__poll__wait=0)
    settings = load_settings(None, conf)
    started = time.monotonic()
    deepest = 0

    for wave in range(WAVES):  # each wave: good and malformed messages interleaved, then one capture
        def send_bad(bodies: list[str]) -> None:
            for body in bodies:
                sent[sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)["MessageId"]] = body

        sender = threading.Thread(target=send_bad, args=(bad[wave::WAVES],))
        sender.start()
        try:
            for key in good_keys[wave::WAVES]:  # the notifications interleave with the poison in the queue
                s3.put_object(Bucket=stack.bucket, Key=key, Body=b'{"a": 1}\n')
        finally:
            sender.join()
        depth = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])["Attributes"]
        deepest = max(deepest, int(depth["ApproximateNumberOfMessages"]))

        run_capture(settings, once=True)

    assert Counter(r["key"] for r in read_table(stack.metadata_path)) == Counter(good_keys)
    quarantined = read_table(stack.metadata_path + "_quarantine")
    by_id = Counter(q["message_id"] for q in quarantined)
    assert len(sent) == BAD_MESSAGES
    assert by_id == Counter(sent.keys()), "each malformed message exactly one quarantine row"
    for row in quarantined:
        assert row["reason"], row
    reasons = Counter(row["reason"].split(":")[0][:60] for row in quarantined)
    print(f"\n{len(good_keys) + len(sent)} messages ({len(good_keys)} good, {len(sent)} malformed) in "
          f"{WAVES} wave(s) (queue depth at most {deepest}), {time.monotonic() - started:.0f}s: "
          f"{len(good_keys)} events landed, {len(quarantined)} quarantine rows: {dict(reasons)}; "
          f"load average {_load()}")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------- hostile files


class _Generated(io.RawIOBase):
    """A seekable body of `head`, `count` times the byte `fill`, then `tail`, made as it is read: a line of
    gigabytes PUT to the endpoint without being held in memory or written to disk."""

    def __init__(self, head: bytes, fill: bytes, count: int, tail: bytes) -> None:
        self._head, self._fill, self._count, self._tail = head, fill, count, tail
        self.size = len(head) + count + len(tail)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = min(self.size, max(0, base + offset))
        return self._pos

    def read(self, size: int = -1, /) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        assert end - self._pos <= 256 << 20, "read in pieces, never whole"
        parts, pos, fill_end = [], self._pos, len(self._head) + self._count
        if pos < len(self._head):
            parts.append(self._head[pos:end])
        if end > len(self._head) and pos < fill_end:
            parts.append(self._fill * (min(end, fill_end) - max(pos, len(self._head))))
        if end > fill_end:
            parts.append(self._tail[max(0, pos - fill_end) : end - fill_end])
        self._pos = end
        return b"".join(parts)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _zstd_bomb(path: Path, size: int) -> None:
    """`size` zero bytes, zstd-compressed (a few dozen KiB), written without holding them in memory."""
    chunk = bytes(min(size, 16 << 20))
    with pa.output_stream(str(path), compression="zstd") as out:
        for _ in range(size // len(chunk)):
            out.write(chunk)


@dataclass(frozen=True)
class _Expect:
    """What one hostile file must give: its landed rows, its error rows (between the bounds), and a word
    the first error row's reason must hold."""

    landed: int
    errors: tuple[int, int] = (1, 1)
    reason: str = ""


_BAD_UTF8 = [b"\xff\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xe2\x82\x28", b"\xf0\x28\x8c\xbc",
             b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]


def _hostile_json_files(tmp_path: Path, good: list[dict[str, Any]]) -> dict[str, tuple[Any, _Expect]]:
    """key -> (body: bytes or a file-like object, expectation). Variant 0 of each kind is CI's file."""
    files: dict[str, tuple[Any, _Expect]] = {}

    def name(stem: str, n: int, suffix: str) -> str:
        return f"j/{stem}{'' if n == 0 else f'-{n}'}{suffix}"

    truncated = gzip.compress(jsonl([{"id": n, "v": "x" * 50} for n in range(2000)]))
    for n in range(VARIANTS):  # cut at 1/2, then at 5 % .. 95 % of the compressed stream
        cut = len(truncated) // 2 if n == 0 else len(truncated) * (5 * n) // 100
        files[name("truncated", n, ".json.gz")] = (truncated[:cut], _Expect(0))
    for n in range(max(1, VARIANTS - 2)):  # the big one, then 192 MiB .. 1.2 GiB (past the fast path's limit)
        bomb = tmp_path / f"bomb-{n}.zst"
        _zstd_bomb(bomb, BOMB_BYTES if n == 0 else (64 << 20) * n + (128 << 20))
        files[name("bomb", n, ".json.zst")] = (bomb, _Expect(0))
    for n in range(VARIANTS):  # invalid bytes in a value, or a whole line of them
        bad = _BAD_UTF8[n % len(_BAD_UTF8)]
        line = b'{"id": 100, "v": "' + bad + b'"}\n' if n < len(_BAD_UTF8) else bad * 3 + b"\n"
        files[name("not-utf8", n, ".json")] = (jsonl(good[:3]) + line + jsonl(good[3:5]), _Expect(5))
    for n in range(VARIANTS):  # objects, arrays, and both, 10,000 to 100,000 deep
        depth = NESTING if n == 0 else 10_000 * (1 + n % 10)
        opening, closing = [('{"a": ', "}"), ("[", "]"), ('[{"a": ', "}]")][n % 3]
        value = opening * depth + "1" + closing * depth
        files[name("nested", n, ".json")] = (
            jsonl(good[:2]) + ('{"id": 101, "v": ' + value + "}\n").encode() + jsonl(good[2:4]), _Expect(4)
        )
    nul_lines = [b'{"id": 102, "v": "a\x00b"}\n\x00\x00\x00\n', b"\x00" * 1000 + b"\n",
                 b'{"id": 102\x00, "v": "b"}\n', b'{"\x00": 1, "id": 102\n', b'\x00{"id": 102, "v": "c"}\n']
    for n in range(VARIANTS):
        lines = nul_lines[n % len(nul_lines)]
        files[name("nul", n, ".json")] = (
            jsonl(good[:2]) + lines + jsonl(good[2:4]), _Expect(4, (1, lines.count(b"\n")))
        )
    line = _Generated(b'{"id": 103, "v": "', b"y", LONG_LINE_BYTES, b'"}\n' + jsonl(good[:2]))
    if LONG_LINE_BYTES < DEFAULT_MAX_LINE_BYTES:  # a long but valid line is data
        files["j/long-line.json"] = (line, _Expect(3, (0, 0)))
    else:  # longer than the line path takes (and over the fast path's size): one error row says so
        files["j/long-line.json"] = (line, _Expect(0, reason="longer than"))
    return files


def _peak_rss_of_descendants(stop: threading.Event, peaks: dict[str, int]) -> None:
    """Sample /proc: the peak RSS (VmHWM) of every process under this one, by kind (python worker, JVM)."""
    while not stop.wait(0.2):
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        todo, seen = list(children.get(os.getpid(), [])), []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo.extend(children.get(pid, []))
        for pid in seen:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            kind = "jvm" if b"java" in cmd.split(b"\0")[0] else "python worker" if b"pyspark" in cmd or \
                b"daemon" in cmd or b"worker" in cmd else "other"
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peaks[kind] = max(peaks.get(kind, 0), int(line.split()[1]) << 10)


@pytest.mark.long
def test_corrupt_and_hostile_files_become_error_rows_with_reasons_and_the_rest_lands(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    good = [{"id": n, "v": f"value {n}"} for n in range(50)]
    s3.put_object(Bucket=stack.bucket, Key="j/good.json", Body=jsonl(good))
    s3.put_object(Bucket=stack.bucket, Key="j/good.json.gz", Body=gzip.compress(jsonl(good)))
    hostile = _hostile_json_files(tmp_path, good)
    for key, (body, _) in hostile.items():
        if isinstance(body, Path):
            with body.open("rb") as stream:
                s3.put_object(Bucket=stack.bucket, Key=key, Body=stream)
        else:
            s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
    header = ",".join(f"c{i}" for i in range(CSV_COLUMNS))
    wide = "\n".join([header, *(",".join(str(r * i) for i in range(CSV_COLUMNS)) for r in range(3))]) + "\n"
    s3.put_object(Bucket=stack.bucket, Key="c/wide.csv", Body=wide.encode())
    del wide
    capture(stack)
    json_target, csv_target = str(tmp_path / "j"), str(tmp_path / "c")
    settings = settings_for(stack, {
        "j": target_conf("j", json_target, "json", key__prefix="j/", schema="id BIGINT, v STRING"),
        "c": target_conf("c", csv_target, "csv", key__prefix="c/", reader__options="header=true"),
    })

    peaks: dict[str, int] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_peak_rss_of_descendants, args=(stop, peaks), daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        totals = run_ingest(settings, once=True, spark=spark)
    finally:
        stop.set()
        sampler.join()
    elapsed = time.monotonic() - started
    assert not totals.failed, totals.failed

    rows = Counter((r["_source_file"].rsplit("/", 1)[-1], r["id"]) for r in read_table(json_target))
    errors = read_table(json_target + "_errors")
    by_file: dict[str, list[str]] = {}
    for e in errors:
        by_file.setdefault(e["_source_file"].rsplit("/", 1)[-1], []).append(str(e["error"])[:120])
    landed = Counter(name for name, _ in rows)
    # The good files land whole; the good lines of a file with a bad line land beside its error row(s);
    # a broken or oversized compressed stream contributes no rows, one error row says why.
    assert landed["good.json"] == landed["good.json.gz"] == len(good)
    wrong = {}
    for key, (_, expect) in hostile.items():
        file = key.rsplit("/", 1)[-1]
        reasons = by_file.get(file, [])
        low, high = expect.errors
        if landed[file] != expect.landed or not low <= len(reasons) <= high or \
                not all(reasons) or (reasons and expect.reason not in reasons[0]):
            wrong[file] = (landed[file], reasons, expect)
    assert not wrong, wrong
    assert set(by_file) <= {key.rsplit("/", 1)[-1] for key in hostile}, by_file
    # Up to Spark's CSV limit, every row lands with every column; wider, the file is one error row.
    if CSV_COLUMNS <= MAX_CSV_COLUMNS:
        wide_rows = read_table(csv_target)
        assert len(wide_rows) == 3 and len(wide_rows[0]) >= CSV_COLUMNS, len(wide_rows)
    else:
        [wide_error] = read_table(csv_target + "_errors")
        assert f"the header has {CSV_COLUMNS} columns" in wide_error["error"], wide_error["error"]
    mib = {kind: round(peak / (1 << 20)) for kind, peak in peaks.items()}
    kinds = Counter(key.rsplit("/", 1)[-1].split("-")[0].split(".")[0] for key in hostile)
    first = {kind: next((r[0] for f, r in by_file.items() if f.startswith(kind)), None) for kind in kinds}
    print(f"\ningest of {len(hostile) + 1} hostile files ({dict(kinds)}, 1 wide CSV) and 2 good ones in "
          f"{elapsed:.0f}s; {len(errors)} error rows; first reason by kind "
          f"{first}; "
          f"peak RSS (MiB) of the processes under the test, sampled every 0.2 s: {mib} (bomb "
          f"{BOMB_BYTES >> 20} MiB of zeros, line {LONG_LINE_BYTES >> 20} MiB, {CSV_COLUMNS} columns; line "
          f"limit {DEFAULT_MAX_LINE_BYTES >> 20} MiB); load average {_load()}")


def test_csv_files_whose_headers_differ_keep_their_own_columns_in_one_batch(make_stack, s3, spark, tmp_path):
    # from_csv maps fields by position: each file must be parsed by its own header, not the batch's first.
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="c/1-ab.csv", Body=b"a,b\n1,2\n")
    s3.put_object(Bucket=stack.bucket, Key="c/2-ba.csv", Body=b"b,a\n20,10\n")  # the same columns, swapped
    s3.put_object(Bucket=stack.bucket, Key="c/3-ac.csv", Body=b"a,c\n7,x\n")  # another column
    capture(stack)
    target = str(tmp_path / "c")
    settings = settings_for(stack, {"c": target_conf("c", target, "csv", reader__options="header=true")})

    totals = run_ingest(settings, once=True, spark=spark)

    assert not totals.failed, totals.failed
    rows = sorted((r["a"], r["b"], r["c"]) for r in read_table(target))
    assert rows == [(1, 2, None), (7, None, "x"), (10, 20, None)], rows


def test_a_csv_wider_than_sparks_column_limit_becomes_an_error_row_and_the_batch_goes_on(
    make_stack, s3, spark, tmp_path
):
    # Found by the full-size run: Spark's CSV parser (the line path's) failed the target's whole batch,
    # every cycle, on a file wider than its limit that the fast path had declined.
    stack = make_stack()
    columns = 21_000
    header = ",".join(f"c{i}" for i in range(columns))
    s3.put_object(Bucket=stack.bucket, Key="c/wide.csv",
                  Body=f'{header}\n{",".join(["1"] * (columns - 1))},a"b\n'.encode())
    clean = f'{header}\n{",".join(["1"] * columns)}\n'
    s3.put_object(Bucket=stack.bucket, Key="c/wide clean.csv", Body=clean.encode())
    s3.put_object(Bucket=stack.bucket, Key="c/narrow.csv", Body=b"c0,c1\n1,x\n2,z\n")  # in the same batch
    capture(stack)
    target = str(tmp_path / "c")
    settings = settings_for(stack, {"c": target_conf("c", target, "csv", reader__options="header=true")})

    totals = run_ingest(settings, once=True, spark=spark)

    assert not totals.failed, {name: reason[:300] for name, reason in totals.failed.items()}
    errors = sorted(read_table(target + "_errors"), key=lambda e: e["_source_file"])
    assert [e["_source_file"].rsplit("/", 1)[1] for e in errors] == ["wide clean.csv", "wide.csv"]
    for error in errors:  # the clean one too: the fast path leaves it to the line path, which records it
        assert error["_source_line"] is None
        assert "the header has 21000 columns, more than the 20480" in error["error"], error["error"]
    assert sorted((r["c0"], r["c1"]) for r in read_table(target)) == [(1, "x"), (2, "z")]


# ------------------------------------------------------------------------- whole-file formats


def _varint(n: int) -> bytes:
    """Avro's zig-zag varint of a long."""
    n, out = (n << 1) ^ (n >> 63), bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


def _avro(rows: int, codec: str = "null") -> bytes:
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    sink = io.BytesIO()
    fastavro.writer(sink, fastavro.parse_schema(schema), [{"id": n} for n in range(rows)], codec=codec)
    return sink.getvalue()


def _orc(rows: int) -> bytes:
    sink = io.BytesIO()
    orc.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), sink)
    return sink.getvalue()


def _lying_avro_files() -> dict[str, bytes]:
    good = _avro(50)
    block = good.index(good[-16:]) + 16  # the first data block follows the header's sync marker
    count = len(_varint(50))
    size = next(i for i in range(block + count, len(good)) if good[i] < 0x80) + 1  # the size varint's end
    return {
        # the block claims 2^50 records: reading stops at the object's end
        "count.avro": good[:block] + _varint(1 << 50) + good[block + count :],
        # the header names a codec the blocks were not written with
        "codec.avro": good.replace(b"\x08null", b"\x0edeflate", 1),
        # the block's byte size points past the object's end
        "size.avro": good[: block + count] + _varint(1 << 40) + good[size:],
        "cut.avro": _avro(5000)[:-700],
    }


_BOMB = (
    b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "' + b"a" * 64 + b'">'
    + b"".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">'.encode() for p, c in zip("abcdefgh", "bcdefghi"[:8],
                                                                                    strict=True))
    + b"]><r><row><v>&i;</v></row></r>"
)


def test_lying_avro_cut_orc_and_xml_bombs_become_one_error_row_each_and_good_files_land(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    put = lambda key, body: s3.put_object(Bucket=stack.bucket, Key=key, Body=body)  # noqa: E731
    put("a/good.avro", _avro(20, codec="deflate"))
    lying = _lying_avro_files()
    for name, body in lying.items():
        put(f"a/{name}", body)
    whole = _orc(3000)
    put("o/good.orc", whole)
    orc_cuts = {"cut-footer.orc": whole[:-10], "cut-half.orc": whole[: len(whole) // 2], "empty.orc": b""}
    for name, body in orc_cuts.items():
        put(f"o/{name}", body)
    put("x/good.xml", b"<r><row><v>1</v></row><row><v>2</v></row></r>")
    xml_bad = {
        "bomb.xml": _BOMB,  # 10^8 "a"s x 64 if expanded
        "external.xml": b'<!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]><r><row><v>&e;</v></row></r>',
        "quadratic.xml": b'<!DOCTYPE r [<!ENTITY q "' + b"q" * 100_000 + b'">]><r><row><v>'
        + b"&q;" * 1000 + b"</v></row></r>",
    }
    for name, body in xml_bad.items():
        put(f"x/{name}", body)
    capture(stack)
    a, o, x = (str(tmp_path / t) for t in "aox")
    settings = settings_for(stack, {
        "a": target_conf("a", a, "avro", key__prefix="a/"),
        "o": target_conf("o", o, "orc", key__prefix="o/"),
        "x": target_conf("x", x, "xml", key__prefix="x/", reader__options="rowTag=row"),
    })

    totals = run_ingest(settings, once=True, spark=spark)

    assert not totals.failed, totals.failed
    for target, good, bad in ((a, "good.avro", lying), (o, "good.orc", orc_cuts), (x, "good.xml", xml_bad)):
        rows = Counter(r["_source_file"].rsplit("/", 1)[-1] for r in read_table(target))
        assert rows == {good: {"good.avro": 20, "good.orc": 3000, "good.xml": 2}[good]}, rows
        errors = {e["_source_file"].rsplit("/", 1)[-1]: e["error"] for e in read_table(target + "_errors")}
        assert set(errors) == set(bad) and all(errors.values()), errors
    xml_errors = read_table(x + "_errors")
    assert all("entity expansion is off" in e["error"] for e in xml_errors), xml_errors
