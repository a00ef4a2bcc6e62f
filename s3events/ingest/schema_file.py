"""A target's `schema.file`, read once at start-up into its declared schema (`TargetSpec.schema_ddl`):
an Avro schema (`.avsc`, or text that starts with '{') or a Spark DDL column list. Every mistake is a
ConfigError (exit 2) naming the key, the file and the field."""

from __future__ import annotations

import dataclasses

from s3events.config import keys
from s3events.config.avro_schema import avro_columns
from s3events.config.ddl_schema import DdlError, ddl_text, parse_columns
from s3events.errors import ConfigError
from s3events.infra import aws
from s3events.ingest.files.transform import read_user_file
from s3events.ingest.target import TargetSpec


def with_schema_file(spec: TargetSpec, options: aws.AwsOptions) -> TargetSpec:
    """`spec` with its `schema.file` read into `schema_ddl` (unchanged without one)."""
    if not spec.schema_file:
        return spec
    key = keys.TARGET_SCHEMA_FILE.concrete(spec.name)
    if spec.schema_ddl:
        raise ConfigError(key, f"set either {keys.TARGET_SCHEMA.concrete(spec.name)} or {key}, not both")
    text = read_user_file(spec.schema_file, key, options)
    return dataclasses.replace(spec, schema_ddl=schema_text(spec.schema_file, text, key))


def schema_text(source: str, text: str, key: str) -> str:
    """The DDL text of a schema file's columns; ConfigError naming `key`, the file and the field."""
    avro = source.lower().endswith(".avsc") or text.lstrip().startswith("{")
    try:
        columns = avro_columns(text) if avro else parse_columns(_without_comments(text))
    except DdlError as exc:
        kind = "an Avro schema" if avro else "a Spark DDL column list"
        raise ConfigError(key, f"{source} is not {kind} we can use: {exc}") from None
    return ddl_text(columns)


def _without_comments(text: str) -> str:
    """A DDL file's lines without `--` comments (a DDL file is often kept with notes)."""
    return " ".join(line.split("--", 1)[0] for line in text.splitlines())
