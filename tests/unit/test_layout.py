"""The pure modules (parsing, planning, models, cycles, config) import no AWS, Delta or Spark library, not
even through another module: they are tested without servers and read without knowing any I/O."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "s3events.events.parse",
    "s3events.events.record",
    "s3events.ingest.model",
    "s3events.ingest.plan",
    "s3events.ingest.checkpoint",
    "s3events.ingest.target",
    "s3events.ingest.ports",
    "s3events.ingest.cycle",
    "s3events.ingest.report",
    "s3events.ingest.notify.model",
    "s3events.ingest.files.case_clash",
    "s3events.ingest.files.latest_rows",
    "s3events.ingest.files.lineage",
    "s3events.ingest.files.formats.csv_types",
    "s3events.ingest.files.rescue",  # runs in executors: the rescued column's text
    "s3events.ingest.merge_scope",
    "s3events.ingest.deletes",
    "s3events.ingest.files.transform_sql",
    "s3events.ingest.files.transform_arrow",  # runs in executors: a transform's Arrow plan
    "s3events.ingest.files.transform_arrow_plan",
    "s3events.status.model",
    "s3events.catalog.model",
    "s3events.catalog.ports",
    "s3events.catalog.sync",
    "s3events.maintenance.model",
    "s3events.metadata.known_ids",
    "s3events.metadata.schema",
    "s3events.capture.ports",
    "s3events.capture.cycle",
    "s3events.capture.receive",
    "s3events.capture.heartbeat",
    "s3events.backfill.model",
    "s3events.backfill.diff",
    "s3events.setup.model",
    "s3events.setup.policy",
    "s3events.setup.notifications",
    "s3events.setup.plan",
    "s3events.setup.links",
    "s3events.config",
    "s3events.runloop",
    "s3events.errors",
    "s3events.infra.delta_errors",
    "s3events.infra.file_stats",  # runs in executors, beside Parquet writes
]
IO_LIBRARIES = {"boto3", "botocore", "deltalake", "pyspark", "prometheus_client"}


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io_library(module: str) -> None:
    # A fresh interpreter: this test process has imported everything already.
    probe = f"import sys, {module}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    assert not loaded & IO_LIBRARIES, f"{module} pulls in {sorted(loaded & IO_LIBRARIES)}"


def test_no_two_test_modules_share_a_name() -> None:
    """The test folders are not packages: pytest imports a module by its basename, and a second
    `test_x.py` in another folder fails collection ("import file mismatch") on a fresh checkout."""
    from collections import Counter
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    names = Counter(p.name for p in tests.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []
