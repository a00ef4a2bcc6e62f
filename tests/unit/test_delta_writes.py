"""Every delta-rs call of ours that writes data files passes `delta_stats.writer_properties`: without it
delta-rs writes lossy statistics (docs/design/statistics.md). Checked on the source, so a new write
cannot forget it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# delta-rs operations that write Parquet files (and so statistics); each takes commit_properties.
WRITING = {"write_deltalake", "merge", "delete", "update", "compact", "z_order"}


def delta_rs_writes() -> list[tuple[str, int, ast.Call]]:
    found = []
    for path in sorted((ROOT / "s3events").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            keywords = {k.arg for k in node.keywords}
            if name in WRITING and keywords & {"commit_properties", "post_commithook_properties"}:
                found.append((str(path.relative_to(ROOT)), node.lineno, node))
    return found


def test_every_delta_rs_write_bounds_only_the_columns_delta_rs_bounds_exactly():
    writes = delta_rs_writes()
    assert len(writes) >= 8  # the finder finds them (MERGE, appends, DELETE, compaction, migration)
    missing = [
        f"{path}:{line}"
        for path, line, call in writes
        if "writer_properties" not in {k.arg for k in call.keywords}
    ]
    assert not missing, f"delta-rs writes without delta_stats.writer_properties(...): {missing}"
