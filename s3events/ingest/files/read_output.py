"""What reading one batch gives its target (`ReadOutput`): the result both paths fill and the post-parse
stage (`post_parse`), the rescued column's count (`rescue`) and the commit read."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from s3events.infra.parquet_files import WrittenFile
from s3events.ingest.files.merge_input import MergeInput


@dataclass
class ReadOutput:
    """What reading one batch gives its target."""

    schema: pa.Schema  # the target's full schema after this batch (data + lineage + partition columns)
    errors: pa.Table  # ERROR_SCHEMA rows
    rows: int = 0
    files: list[WrittenFile] = field(default_factory=list)  # append mode: data files the executors wrote
    merge: MergeInput | None = None  # merge mode: the batch's latest row per record key
    failed_files: dict[str, str] = field(default_factory=dict)  # whole-file problems: uri -> reason
    fast_path_files: int = 0  # input files the fast path read (the others took the line path)
    filtered: int = 0  # input rows the target's transform removed (a WHERE): counted, not errors
    transform: str | None = None  # the identity of the transform's SQL (`TransformSpec.identity`)
    ignored_fields: tuple[str, ...] = ()  # new fields schema.evolution=ignore dropped
    rescued: int = 0  # rows with data in the rescued column (`rescue.rescued_rows`)
