"""Every configuration key's one declaration.

Read a value with `settings.get(keys.QUEUE_URL)`; per-target keys (`TARGET_*`) with
`settings.get_for("events", keys.TARGET_PATH)`. The reference docs/configuration.md is generated from
these declarations (`python -m s3events.config.docs > docs/configuration.md`).

Credentials are deliberately absent: they come only from the AWS credential chain (environment variables,
profiles, instance or container roles), never from properties files.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args

from s3events.config.column_types import ColumnTypesType, NamedGroupsPattern
from s3events.config.ddl_schema import DdlColumnsType
from s3events.config.registry import NAME_PATTERN, Key, Registry, Removed, SettingsView
from s3events.config.value_types import (
    BoolType,
    ChoiceType,
    FloatType,
    IntType,
    KeyValueListType,
    ListType,
    S3UriType,
    StrType,
    TablePathType,
    UrlType,
)

__all__ = [
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_STARTUP_TIMEOUT_SECONDS",
    "BACKFILL_INTERVAL_SECONDS",
    "BACKFILL_SOURCES",
    "CAPTURE_COMMIT_MAX_ATTEMPTS",
    "CAPTURE_MIN_SYNC_INTERVAL_SECONDS",
    "CATALOG_DATABASE",
    "CATALOG_HIVE_METASTORE_URI",
    "CATALOG_TYPE",
    "COMMANDS",
    "INGEST_CHANGE_CHECK_INTERVAL_SECONDS",
    "INGEST_MIN_SYNC_INTERVAL_SECONDS",
    "INGEST_MISSING_CHECKPOINT_STRATEGY",
    "INGEST_NOTIFY_MAX_LAG_VERSIONS",
    "INGEST_TARGETS",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "MAINTENANCE_CHECKPOINT_INTERVAL",
    "MAINTENANCE_COMPACT_SMALL_FILES",
    "MAINTENANCE_ENABLED",
    "MAINTENANCE_INTERVAL_SECONDS",
    "MAINTENANCE_LOG_RETENTION_DAYS",
    "MAINTENANCE_TARGET_FILE_BYTES",
    "MAINTENANCE_VACUUM_RETENTION_HOURS",
    "MESSAGE_MAX_BYTES",
    "METADATA_DEDUPE_IDS_IN_MEMORY",
    "METADATA_DEDUPE_WINDOW_DAYS",
    "METADATA_TABLE_PATH",
    "METRICS_HOST",
    "METRICS_PORT",
    "POISON_ACTION",
    "QUARANTINE_RAW_MAX_CHARS",
    "QUARANTINE_TABLE_PATH",
    "QUEUE_LONG_POLL_WAIT",
    "QUEUE_MAX_BATCH_SECONDS",
    "QUEUE_MAX_MESSAGES_PER_BATCH",
    "QUEUE_RECEIVE_CONCURRENCY",
    "QUEUE_URL",
    "QUEUE_VISIBILITY_TIMEOUT",
    "REGISTRY",
    "REMOVED",
    "SETUP_BUCKETS",
    "SETUP_BUCKET_ACCOUNT",
    "SETUP_DEAD_LETTER_MAX_RECEIVE_COUNT",
    "SETUP_DEAD_LETTER_QUEUE_NAME",
    "SETUP_EVENTS",
    "SETUP_PREFIXES",
    "SETUP_PROBE_PREFIX",
    "SETUP_SUFFIXES",
    "SETUP_VERIFY_TIMEOUT_SECONDS",
    "SPARK_MASTER",
    "STATUS_MAX_CAPTURE_STALL_SECONDS",
    "STATUS_MAX_LAG_SECONDS",
    "TARGET_BINARY_MAX_BYTES",
    "TARGET_BUCKET",
    "TARGET_CATALOG_TABLE",
    "TARGET_CSV_FAST_PATH",
    "TARGET_DELETE_FIELD",
    "TARGET_DELETE_FIELD_KEEP",
    "TARGET_DELETE_VALUES",
    "TARGET_DRIVER_READ_MAX_BYTES",
    "TARGET_ERROR_TABLE_PATH",
    "TARGET_FORMAT",
    "TARGET_GLOB",
    "TARGET_IGNORE_PREFIX",
    "TARGET_IGNORE_SUBSTRING",
    "TARGET_JSON_FAST_PATH",
    "TARGET_KEY_COLUMNS",
    "TARGET_KEY_COLUMNS_REQUIRED",
    "TARGET_KEY_COLUMN_TYPES",
    "TARGET_KEY_PATTERN",
    "TARGET_KEY_PREFIX",
    "TARGET_MAX_BYTES_PER_BATCH",
    "TARGET_MAX_FILES_PER_BATCH",
    "TARGET_MODE",
    "TARGET_NOTIFY_EVENTBRIDGE_BUS_NAME",
    "TARGET_NOTIFY_SNS_TOPIC_ARN",
    "TARGET_NOTIFY_SQS_QUEUE_URL",
    "TARGET_ON_MISSING_OBJECT",
    "TARGET_ON_OBJECT_REMOVED",
    "TARGET_ORDERING_FIELD",
    "TARGET_PARTITION_BY",
    "TARGET_PATH",
    "TARGET_READER_OPTIONS",
    "TARGET_RECORD_KEY",
    "TARGET_RESCUED_COLUMN",
    "TARGET_SCHEMA",
    "TARGET_SCHEMA_EVOLUTION",
    "TARGET_SCHEMA_FILE",
    "TARGET_SCHEMA_HINTS",
    "TARGET_SCHEMA_INFER_TYPES",
    "TARGET_TRANSFORM_SQL",
    "TARGET_TRANSFORM_SQL_FILE",
    "CatalogType",
    "CheckpointStrategy",
    "LogFormat",
    "LogLevel",
    "OnMissingObject",
    "OnObjectRemoved",
    "PoisonAction",
    "SchemaEvolution",
    "TargetFormat",
    "TargetMode",
]

PoisonAction = Literal["delete", "redrive"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["text", "json"]
CheckpointStrategy = Literal["earliest", "latest"]
TargetFormat = Literal["json", "csv", "parquet", "text", "avro", "orc", "xml", "binary"]
TargetMode = Literal["append", "merge"]
OnMissingObject = Literal["skip", "fail"]
SchemaEvolution = Literal["add", "rescue", "fail", "ignore"]
OnObjectRemoved = Literal["ignore", "delete"]
CatalogType = Literal["none", "glue", "hive"]

COMMANDS: tuple[str, ...] = (
    "capture",
    "ingest",
    "backfill",
    "status",
    "maintain",
    "migrate",
    "setup",
    "teardown",
)
"""The commands `Settings.validate_for` knows (`Key.required_for` names these)."""

_CAPTURE = frozenset({"capture"})
_INGEST = frozenset({"ingest"})
_SETUP = frozenset({"setup", "teardown"})
_ALL = frozenset(COMMANDS) - _SETUP  # the pipeline's commands; setup and teardown touch no table

_TARGET = "s3events.ingest.target.<name>."
_BUCKET = StrType(pattern=r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", pattern_doc="an S3 bucket name")
# Glue's and Athena's rule for database and table names (Hive folds names to lower case the same way).
_CATALOG_NAME = StrType(
    pattern=r"[a-z0-9_]{1,255}", pattern_doc="1-255 of lower-case letters, digits and '_' (Glue and Athena)"
)
_COLUMNS = ListType(unique=True)

# --------------------------------------------------------------------------------------------------- AWS

AWS_REGION: Key[str | None] = Key(
    name="s3events.aws.region",
    type=StrType(pattern=r"[a-z0-9-]+", pattern_doc="an AWS region name, e.g. us-east-1"),
    doc="AWS region of the queue, the buckets and the tables; unset = the AWS SDK region chain "
    "(AWS_REGION, AWS_DEFAULT_REGION, profile).",
    group="AWS",
)
AWS_ENDPOINT_URL: Key[str | None] = Key(
    name="s3events.aws.endpoint.url",
    type=UrlType(),
    doc="One endpoint URL for S3, SQS and Delta storage instead of AWS's (e.g. a local moto or MinIO "
    "server); an http:// URL allows plain HTTP; unset = the AWS endpoints.",
    group="AWS",
)

AWS_STARTUP_TIMEOUT_SECONDS: Key[float] = Key(
    name="s3events.aws.startup.timeout.seconds",
    type=FloatType(min=0, max=3600),
    default=60.0,
    doc="At start-up every command checks the endpoint, the queue and each table location it uses; an "
    "unreachable or throttling endpoint is retried with backoff for this long, then the command exits 3 "
    "naming what it could not reach. 0 = one attempt. Later, running processes back off without limit.",
    group="AWS",
)

# ------------------------------------------------------------------------------------------------ source

QUEUE_URL: Key[str | None] = Key(
    name="s3events.source.queue.url",
    type=UrlType(),
    doc="URL of the SQS queue that receives the S3 event notifications (direct, SNS-wrapped or EventBridge).",
    required_for=_CAPTURE | _SETUP,
    group="Source queue",
)
QUEUE_LONG_POLL_WAIT: Key[int] = Key(
    name="s3events.source.queue.long.poll.wait",
    type=IntType(min=0, max=20),
    default=20,
    doc="Seconds one ReceiveMessage call waits for messages to arrive (SQS WaitTimeSeconds; 0 = short "
    "polling).",
    group="Source queue",
)
QUEUE_VISIBILITY_TIMEOUT: Key[int] = Key(
    name="s3events.source.queue.visibility.timeout",
    type=IntType(min=0, max=43200),
    default=30,
    doc="Seconds a received message stays hidden from other receivers (SQS VisibilityTimeout); keep it "
    "above the time to gather and commit one batch.",
    group="Source queue",
)
QUEUE_MAX_MESSAGES_PER_BATCH: Key[int] = Key(
    name="s3events.source.queue.max.messages.per.batch",
    type=IntType(min=1, max=100000),
    default=1000,
    doc="Maximum number of SQS messages gathered into one metadata-table commit.",
    group="Source queue",
)
QUEUE_MAX_BATCH_SECONDS: Key[float] = Key(
    name="s3events.source.queue.max.batch.seconds",
    type=FloatType(min=0.1, max=3600),
    default=10.0,
    doc="Time budget in seconds for gathering one batch; the batch is committed when it is full or this "
    "time has passed.",
    group="Source queue",
)
QUEUE_RECEIVE_CONCURRENCY: Key[int] = Key(
    name="s3events.source.queue.receive.concurrency",
    type=IntType(min=1, max=32),
    default=4,
    doc="Number of ReceiveMessage calls in flight at once while gathering a batch.",
    group="Source queue",
)
MESSAGE_MAX_BYTES: Key[int] = Key(
    name="s3events.source.message.max.bytes",
    type=IntType(min=1024, max=1048576),
    default=262144,
    doc="A message body larger than this many bytes is poison: quarantined without being parsed.",
    group="Source queue",
)
POISON_ACTION: Key[PoisonAction] = Key(
    name="s3events.source.poison.action",
    type=ChoiceType(get_args(PoisonAction)),
    default="delete",
    doc="After a poison message is written to the quarantine table: delete it from the queue, or leave "
    "it for the queue's redrive policy (dead-letter queue).",
    group="Source queue",
)

# ---------------------------------------------------------------------------------------------- metadata


def _quarantine_default(settings: SettingsView, _target: str | None) -> str | None:
    base = settings.get(METADATA_TABLE_PATH)
    return f"{base}_quarantine" if base else None


METADATA_TABLE_PATH: Key[str | None] = Key(
    name="s3events.metadata.table.path",
    type=TablePathType(),
    doc="Delta table of captured object events, one row per event (s3://bucket/prefix or a local path).",
    required_for=_ALL,
    group="Metadata table",
)
QUARANTINE_TABLE_PATH: Key[str | None] = Key(
    name="s3events.metadata.quarantine.table.path",
    type=TablePathType(),
    default_from=_quarantine_default,
    default_text="<s3events.metadata.table.path>_quarantine",
    doc="Delta table that keeps poison messages (unparseable or oversized) with their raw body and the "
    "reason.",
    group="Metadata table",
)
METADATA_DEDUPE_WINDOW_DAYS: Key[int] = Key(
    name="s3events.metadata.dedupe.window.days",
    type=IntType(min=15, max=36500),
    default=15,
    doc="Capture's duplicate check looks at rows captured in the last this many days, so its cost stays "
    "flat as the table grows; a batch holding older events (a message redriven from a dead-letter queue "
    "comes back with a new enqueue time) reads back to its oldest event time instead, so 15 is safe and "
    "larger values only cost time.",
    group="Metadata table",
)
METADATA_DEDUPE_IDS_IN_MEMORY: Key[bool] = Key(
    name="s3events.metadata.dedupe.ids.in.memory",
    type=BoolType(),
    default=True,
    doc="Capture keeps the event ids of the dedupe window in memory (8 bytes each: 80 MB for 10 million "
    "events), read once at start, so a batch of new events is appended without reading the window back; "
    "a batch holding a known id still goes through the MERGE. false: every commit is a MERGE (more CPU "
    "and storage reads per event, no memory per id).",
    group="Metadata table",
)
QUARANTINE_RAW_MAX_CHARS: Key[int] = Key(
    name="s3events.metadata.quarantine.raw.max.chars",
    type=IntType(min=256, max=1048576),
    default=65536,
    doc="A raw message body kept in the quarantine table is truncated to this many characters.",
    group="Metadata table",
)

# ----------------------------------------------------------------------------------------------- capture

CAPTURE_MIN_SYNC_INTERVAL_SECONDS: Key[float] = Key(
    name="s3events.capture.min.sync.interval.seconds",
    type=FloatType(min=0, max=86400),
    default=0.0,
    doc="In --continuous mode, the minimum seconds between the starts of two capture cycles (0 = start "
    "the next cycle at once).",
    group="Capture",
)
CAPTURE_COMMIT_MAX_ATTEMPTS: Key[int] = Key(
    name="s3events.capture.commit.max.attempts",
    type=IntType(min=1, max=100),
    default=10,
    doc="Attempts to commit one batch to the metadata table; commit conflicts with other writers are "
    "retried with backoff on fresh table state.",
    group="Capture",
)

# ----------------------------------------------------------------------------------------------- logging

LOG_LEVEL: Key[LogLevel] = Key(
    name="s3events.log.level",
    type=ChoiceType(get_args(LogLevel)),
    default="INFO",
    doc="Level of the s3events log messages (written to stderr).",
    group="Logging",
)
LOG_FORMAT: Key[LogFormat] = Key(
    name="s3events.log.format",
    type=ChoiceType(get_args(LogFormat)),
    default="text",
    doc="Format of the log lines on stderr: text, or json (one JSON object per line: time, level, "
    "logger, message and the cycle's fields) for log collectors.",
    group="Logging",
)

# ----------------------------------------------------------------------------------------------- metrics

METRICS_PORT: Key[int] = Key(
    name="s3events.metrics.port",
    type=IntType(min=0, max=65535),
    default=0,
    doc="Port of the Prometheus /metrics endpoint that capture, ingest and backfill serve while they run "
    "(0 = no endpoint).",
    group="Metrics",
)
METRICS_HOST: Key[str] = Key(
    name="s3events.metrics.host",
    type=StrType(pattern=r"[A-Za-z0-9.:_-]+", pattern_doc="a host name or IP address"),
    default="127.0.0.1",
    doc="Address the metrics endpoint listens on (capture, ingest, backfill); 0.0.0.0 for a scraper on "
    "another host or pod.",
    group="Metrics",
)

# ------------------------------------------------------------------------------------------------ ingest

INGEST_TARGETS: Key[tuple[str, ...]] = Key(
    name="s3events.ingest.targets",
    type=ListType(item=StrType(pattern=NAME_PATTERN, pattern_doc="names of A-Z a-z 0-9 _ -"), unique=True),
    default=(),
    doc="Names of the target tables to ingest into; each is configured by the "
    "s3events.ingest.target.<name>.* keys.",
    required_for=_INGEST,
    group="Ingest",
)
INGEST_MIN_SYNC_INTERVAL_SECONDS: Key[float] = Key(
    name="s3events.ingest.min.sync.interval.seconds",
    type=FloatType(min=0, max=86400),
    default=0.0,
    doc="In --continuous mode, the minimum seconds between the starts of two ingest cycles (0 = start "
    "the next cycle at once).",
    group="Ingest",
)
INGEST_CHANGE_CHECK_INTERVAL_SECONDS: Key[float] = Key(
    name="s3events.ingest.change.check.interval.seconds",
    type=FloatType(min=0, max=60),
    default=0.2,
    doc="In --continuous mode, how often an idle ingest checks whether the metadata table has a new "
    "commit (one HEAD request on S3), so a batch starts right after capture's commit; 0 = no checks: an "
    "idle ingest looks again after a 1 s pause.",
    group="Ingest",
)
INGEST_MISSING_CHECKPOINT_STRATEGY: Key[CheckpointStrategy] = Key(
    name="s3events.ingest.missing.checkpoint.strategy",
    type=ChoiceType(get_args(CheckpointStrategy)),
    default="earliest",
    doc="Where a target with no checkpoint yet starts reading the metadata table: earliest = every "
    "captured event (the table's snapshot at its latest version, in bounded batches, then its change feed "
    "from there: no old versions needed), latest = only events captured after its first run (that point "
    "is recorded in the target's error table at the first run, so later runs and restarts start there too).",
    group="Ingest",
)
INGEST_NOTIFY_MAX_LAG_VERSIONS: Key[int] = Key(
    name="s3events.ingest.notify.max.lag.versions",
    type=IntType(min=1, max=1000000),
    default=10,
    doc="`s3events status` exits 1 when a target with notifications has more data commits than this not "
    "recorded as announced (the newest is recorded by the next commit, so a healthy target shows 0 or 1).",
    group="Ingest",
)
SPARK_MASTER: Key[str | None] = Key(
    name="s3events.spark.master",
    type=StrType(),
    doc="Spark master URL of ingest's session (e.g. local[2], spark://host:7077); unset = the master "
    "spark-submit was given (--master), or local[*] outside spark-submit.",
    group="Ingest",
)

# ------------------------------------------------------------------------------- ingest, per target


def _error_table_default(settings: SettingsView, target: str | None) -> str | None:
    if target is None:
        return None
    base = settings.get_for(target, TARGET_PATH)
    return f"{base}_errors" if base else None


def _catalog_table_default(_settings: SettingsView, target: str | None) -> str | None:
    return target.lower().replace("-", "_") if target else None


def _target(suffix: str, **kwargs: Any) -> Any:
    return Key(
        name=_TARGET + suffix,
        instances_from="s3events.ingest.targets",
        group="Ingest targets",
        **kwargs,
    )


_NO_OPTIONS: Mapping[str, str] = MappingProxyType({})

TARGET_PATH: Key[str | None] = _target(
    "path",
    type=TablePathType(),
    doc="Delta table this target's records are written to (s3://bucket/prefix or a local path).",
    required_for=_INGEST,
)
TARGET_FORMAT: Key[TargetFormat | None] = _target(
    "format",
    type=ChoiceType(get_args(TargetFormat)),
    doc="Format of this target's source files: json (one object per line; a document or a top-level "
    "array with reader.options=multiLine=true), csv (quoted newlines with multiLine=true), parquet, text "
    "(one record per line), avro, orc, xml (one record per reader.options rowTag element) or binary "
    "(one row per object: content, size).",
    required_for=_INGEST,
)
TARGET_KEY_PREFIX: Key[str] = _target(
    "key.prefix",
    type=StrType(),
    default="",
    doc="Only objects whose key starts with this prefix go to this target (empty = any key).",
)
TARGET_BUCKET: Key[str | None] = _target(
    "bucket",
    type=_BUCKET,
    doc="Only objects in this bucket go to this target (unset = any bucket).",
)
TARGET_IGNORE_PREFIX: Key[tuple[str, ...]] = _target(
    "ignore.prefix",
    type=ListType(),
    default=(),
    doc="Objects whose key starts with any of these prefixes are skipped.",
)
TARGET_IGNORE_SUBSTRING: Key[tuple[str, ...]] = _target(
    "ignore.substring",
    type=ListType(),
    default=(),
    doc="Objects whose key contains any of these substrings are skipped.",
)
TARGET_GLOB: Key[str | None] = _target(
    "glob",
    type=StrType(),
    doc="Only objects whose whole decoded key matches this glob go to this target, e.g. **/*.json.gz; "
    "'*' and '?' never match '/', '**' does ('**/' may match no folder), '[...]' is a character class.",
)
TARGET_SCHEMA: Key[str | None] = _target(
    "schema",
    type=StrType(),
    doc="Spark DDL schema of the records, e.g. 'id BIGINT, ts TIMESTAMP' (unset = inferred from the files).",
)
TARGET_SCHEMA_EVOLUTION: Key[SchemaEvolution] = _target(
    "schema.evolution",
    type=ChoiceType(get_args(SchemaEvolution)),
    default="add",
    doc="What a field the target's table lacks does once the table exists: add = a new column; rescue = "
    "the table's columns never change, the field's value goes into the rescued column (rescued.column, "
    "default _rescued_data), as does a value that does not fit its column; fail = the batch commits "
    "nothing and the target fails, naming the file, line and field (the next run starts at the same "
    "checkpoint); ignore = the field is dropped (counted in the batch's log line).",
)
TARGET_RESCUED_COLUMN: Key[str | None] = _target(
    "rescued.column",
    type=StrType(pattern=r"[A-Za-z_][A-Za-z0-9_]*", pattern_doc="a column name (letters, digits, _)"),
    doc="json and csv: a string column holding, as one JSON object, the fields of a row that did not fit "
    "(a value of the wrong type, and under schema.evolution=rescue a field the table lacks), instead of "
    "an error row; null when nothing was rescued (unset = no such column, unless schema.evolution=rescue: "
    "then _rescued_data).",
)
TARGET_SCHEMA_HINTS: Key[Mapping[str, str]] = _target(
    "schema.hints",
    type=DdlColumnsType(),
    default=_NO_OPTIONS,
    doc="Types of some columns in Spark DDL, e.g. amount DECIMAL(18,2), tags MAP<STRING,STRING> (json and "
    "csv): a field the records hold takes its hinted type (a hint adds no column), the others are "
    "inferred; a value that does not cast to its column's type is a misfit (see schema.evolution). A "
    "column the table already has keeps its type. With schema or schema.file, a hint replaces or adds "
    "that column there.",
)
TARGET_SCHEMA_INFER_TYPES: Key[bool] = _target(
    "schema.infer.types",
    type=BoolType(),
    default=True,
    doc="false = every inferred column is STRING (json and csv): JSON strings, integers and booleans as "
    "written, other numbers as Spark prints them, objects and arrays as their JSON text; schema.hints "
    "still apply.",
)
TARGET_SCHEMA_FILE: Key[str | None] = _target(
    "schema.file",
    type=StrType(),
    doc="A file (local path or s3://bucket/key) declaring the records' columns, read at start-up: an Avro "
    "schema (.avsc, or text starting with '{') whose record fields become the columns, or a Spark DDL "
    "column list; instead of schema.",
)
TARGET_TRANSFORM_SQL: Key[str | None] = _target(
    "transform.sql",
    type=StrType(),
    doc="Spark SQL run on each batch before it is written, reading the parsed rows as `src` (or Hudi's "
    "<SRC>), e.g. SELECT *, to_date(ts) AS dt FROM src WHERE id IS NOT NULL; row-wise only (no aggregate, "
    "window, join, DISTINCT or LIMIT).",
)
TARGET_TRANSFORM_SQL_FILE: Key[str | None] = _target(
    "transform.sql.file",
    type=StrType(),
    doc="A file (local path or s3://bucket/key) of ';'-separated Spark SQL statements (temporary views, "
    "then the query whose rows are written), read at start-up; instead of transform.sql.",
)
TARGET_READER_OPTIONS: Key[Mapping[str, str]] = _target(
    "reader.options",
    type=KeyValueListType(),
    default=_NO_OPTIONS,
    doc="Extra Spark reader options as comma-separated k=v pairs, e.g. header=true,sep=; (values cannot "
    "contain ',').",
)
TARGET_BINARY_MAX_BYTES: Key[int] = _target(
    "binary.max.bytes",
    type=IntType(min=1, max=1 << 30),
    default=16 << 20,
    doc="binary format: the largest object ingested as one row; a larger one is an error row (its bytes "
    "are not read).",
)
TARGET_JSON_FAST_PATH: Key[bool] = _target(
    "json.fast.path",
    type=BoolType(),
    default=True,
    doc="json format: parse clean files whole with pyarrow on the executors (several times faster); "
    "files it cannot parse exactly as Spark would still take the line-by-line path. false = every "
    "file takes the line path.",
)
TARGET_CSV_FAST_PATH: Key[bool] = _target(
    "csv.fast.path",
    type=BoolType(),
    default=True,
    doc="csv format: parse clean files whole with pyarrow on the executors (several times faster), with "
    "the header, sep/delimiter, quote and escape reader options; files it cannot parse exactly as Spark's "
    "from_csv would (quotes inside fields, values of types it does not infer, other reader options) "
    "still take the line-by-line path. false = every file takes the line path.",
)
TARGET_DRIVER_READ_MAX_BYTES: Key[int] = _target(
    "driver.read.max.bytes",
    type=IntType(min=0),
    default=64 << 20,
    doc="Fast path: a batch whose source files total at most this many bytes is read in the driver, one "
    "thread per core, instead of by a Spark job, so a small batch does not wait for a job to start (a "
    "compressed file counts as 128 MiB, what it may expand to). With a transform, such a batch's rows "
    "also go through Spark's driver as Arrow and are written by the driver. 0 = always a Spark job.",
)
TARGET_MODE: Key[TargetMode] = _target(
    "mode",
    type=ChoiceType(get_args(TargetMode)),
    default="append",
    doc="append = add every record; merge = upsert by record.key (update rows with an equal key, insert "
    "the rest).",
)
TARGET_RECORD_KEY: Key[tuple[str, ...]] = _target(
    "record.key",
    type=_COLUMNS,
    default=(),
    doc="Columns that identify a record; required when mode=merge.",
)
TARGET_ORDERING_FIELD: Key[str | None] = _target(
    "ordering.field",
    type=StrType(),
    doc="Column that picks the winner among records with the same record key: the largest value wins "
    "(like Hudi's precombine field).",
)
TARGET_DELETE_FIELD: Key[str | None] = _target(
    "delete.field",
    type=StrType(),
    doc="mode=merge: column whose value marks a record as a delete (e.g. Op of AWS DMS files, "
    "_is_deleted); when the latest record of a key is one, the key's row is removed from the target. "
    "Needs delete.values; not with mode=append or on.object.removed=delete.",
)
TARGET_DELETE_VALUES: Key[tuple[str, ...]] = _target(
    "delete.values",
    type=ListType(),
    default=(),
    doc="Values of delete.field that mark a delete, compared as text (a boolean flag as true); null or "
    "any other value is an upsert. Required with delete.field.",
)
TARGET_DELETE_FIELD_KEEP: Key[bool] = _target(
    "delete.field.keep",
    type=BoolType(),
    default=False,
    doc="Write the delete.field column to the target (false: it decides, but is not stored).",
)
TARGET_PARTITION_BY: Key[tuple[str, ...]] = _target(
    "partition.by",
    type=_COLUMNS,
    default=(),
    doc="Columns the target table is partitioned by, applied when the table is created.",
)
TARGET_KEY_PATTERN: Key[str | None] = _target(
    "key.pattern",
    type=NamedGroupsPattern(),
    doc="A regular expression searched in each object's decoded key; its named groups become columns, "
    "e.g. ^events/(?P<year>\\d{4})/(?P<month>\\d{2})/ (Java's (?<name>...) too; a .properties file "
    "needs \\\\d for \\d). A record field of the same name wins where it has a value.",
)
TARGET_KEY_COLUMNS: Key[tuple[str, ...]] = _target(
    "key.columns",
    type=_COLUMNS,
    default=(),
    doc="Columns taken from Hive-style name=value folders of each object's key (%XX escapes undone as "
    "Spark's partition discovery does), e.g. dt,region. A record field of the same name wins where it "
    "has a value.",
)
TARGET_KEY_COLUMN_TYPES: Key[Mapping[str, str]] = _target(
    "key.column.types",
    type=ColumnTypesType(),
    default=_NO_OPTIONS,
    doc="Types of the key columns (key.pattern groups, key.columns), e.g. year INT, dt DATE; the others "
    "are STRING. An object whose value does not cast is one error row and nothing else.",
)
TARGET_KEY_COLUMNS_REQUIRED: Key[bool] = _target(
    "key.columns.required",
    type=BoolType(),
    default=False,
    doc="true = an object whose key does not match key.pattern, or lacks a key.columns folder, is one "
    "error row and nothing else; false = its key columns are null.",
)
TARGET_MAX_FILES_PER_BATCH: Key[int] = _target(
    "max.files.per.batch",
    type=IntType(min=1, max=1000000),
    default=1000,
    doc="Maximum number of source files read into one target commit.",
)
TARGET_MAX_BYTES_PER_BATCH: Key[int] = _target(
    "max.bytes.per.batch",
    type=IntType(min=1),
    default=1073741824,
    doc="Maximum total bytes of source files read into one target commit (a larger single file forms a "
    "batch of its own).",
)
TARGET_ERROR_TABLE_PATH: Key[str | None] = _target(
    "error.table.path",
    type=TablePathType(),
    default_from=_error_table_default,
    default_text="<target path>_errors",
    doc="Delta table for records and files of this target that fail to parse, with their source file "
    "and line.",
)
TARGET_CATALOG_TABLE: Key[str | None] = _target(
    "catalog.table",
    type=_CATALOG_NAME,
    default_from=_catalog_table_default,
    default_text="the target's name, lower case, '-' as '_'",
    doc="Table name of this target in s3events.catalog.database (with s3events.catalog.type glue or hive).",
)
TARGET_ON_MISSING_OBJECT: Key[OnMissingObject] = _target(
    "on.missing.object",
    type=ChoiceType(get_args(OnMissingObject)),
    default="skip",
    doc="When a referenced object no longer exists: skip it, or fail the ingest run.",
)
TARGET_ON_OBJECT_REMOVED: Key[OnObjectRemoved] = _target(
    "on.object.removed",
    type=ChoiceType(get_args(OnObjectRemoved)),
    default="ignore",
    doc="ignore = the target appends every object content once and keeps rows of removed objects; "
    "delete = the target mirrors S3: a removal deletes the object's rows and an overwrite replaces them "
    "(docs/ingest.md, Object lifecycle).",
)

TARGET_NOTIFY_SNS_TOPIC_ARN: Key[str | None] = _target(
    "notify.sns.topic.arn",
    type=StrType(
        pattern=r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?",
        pattern_doc="an SNS topic ARN, arn:aws:sns:<region>:<account>:<topic>",
    ),
    doc="SNS topic that gets one message per data commit of this target, after the commit, at least once "
    "and in version order (docs/notifications.md); unset = none.",
)
TARGET_NOTIFY_SQS_QUEUE_URL: Key[str | None] = _target(
    "notify.sqs.queue.url",
    type=UrlType(),
    doc="SQS queue that gets one message per data commit of this target (as the SNS topic; a .fifo queue "
    "gets the target as message group and (path, version) as deduplication id); unset = none.",
)
TARGET_NOTIFY_EVENTBRIDGE_BUS_NAME: Key[str | None] = _target(
    "notify.eventbridge.bus.name",
    type=StrType(
        pattern=r"[A-Za-z0-9._/:-]{1,1600}",
        pattern_doc="an event bus name or ARN (default for the default bus)",
    ),
    doc="EventBridge bus that gets one event per data commit of this target (source s3events, detail-type "
    "'Delta table commit', the message as detail); unset = none.",
)

# ---------------------------------------------------------------------------------------------- backfill

BACKFILL_SOURCES: Key[tuple[str, ...]] = Key(
    name="s3events.backfill.sources",
    type=ListType(item=S3UriType(), unique=True),
    default=(),
    doc="Where backfill lists objects the metadata table does not know: s3://bucket or "
    "s3://bucket/prefix URIs.",
    required_for=frozenset({"backfill"}),
    group="Backfill",
)
BACKFILL_INTERVAL_SECONDS: Key[float] = Key(
    name="s3events.backfill.interval.seconds",
    type=FloatType(min=0, max=604800),
    default=0.0,
    doc="Capture also runs a backfill every this many seconds (0 = off; `s3events backfill` runs one on "
    "demand).",
    group="Backfill",
)

# ------------------------------------------------------------------------------------------- maintenance

MAINTENANCE_ENABLED: Key[bool] = Key(
    name="s3events.maintenance.enabled",
    type=BoolType(),
    default=True,
    doc="Capture maintains the metadata and quarantine tables, ingest its targets and their error tables, "
    "between their own cycles (`s3events maintain` runs a pass on demand either way).",
    group="Maintenance",
)
MAINTENANCE_INTERVAL_SECONDS: Key[float] = Key(
    name="s3events.maintenance.interval.seconds",
    type=FloatType(min=60, max=604800),
    default=3600.0,
    doc="How often a process runs its maintenance pass (compaction, checkpoint, log cleanup, vacuum).",
    group="Maintenance",
)
MAINTENANCE_COMPACT_SMALL_FILES: Key[int] = Key(
    name="s3events.maintenance.compact.small.files",
    type=IntType(min=2, max=100000),
    default=8,
    doc="Between full passes, a process compacts one of its tables as soon as it (or, for a partitioned "
    "table such as the metadata table's identity buckets, one partition) holds this many small files "
    "(checked about every 30 s): each small file is one more file every MERGE and read opens, so commit "
    "cost stays flat instead of climbing until the next pass.",
    group="Maintenance",
)
MAINTENANCE_TARGET_FILE_BYTES: Key[int] = Key(
    name="s3events.maintenance.target.file.bytes",
    type=IntType(min=1 << 20, max=1 << 32),
    default=128 << 20,
    doc="Compaction rewrites files smaller than this into files of about this size.",
    group="Maintenance",
)
MAINTENANCE_VACUUM_RETENTION_HOURS: Key[int] = Key(
    name="s3events.maintenance.vacuum.retention.hours",
    type=IntType(min=168, max=87600),
    default=168,
    doc="Vacuum deletes files no version has needed for this long (at least 7 days: readers and "
    "batches in flight keep working); kept longer while an ingest target still needs them.",
    group="Maintenance",
)
MAINTENANCE_LOG_RETENTION_DAYS: Key[int] = Key(
    name="s3events.maintenance.log.retention.days",
    type=IntType(min=7, max=36500),
    default=30,
    doc="Log cleanup removes commit files older than this (behind a checkpoint); kept longer while an "
    "ingest target still needs them.",
    group="Maintenance",
)
MAINTENANCE_CHECKPOINT_INTERVAL: Key[int] = Key(
    name="s3events.maintenance.checkpoint.interval.commits",
    type=IntType(min=10, max=100000),
    default=100,
    doc="A maintenance pass writes a Delta checkpoint when this many commits followed the last one, so "
    "opening a table reads one checkpoint and a few commits instead of its whole log.",
    group="Maintenance",
)

# ------------------------------------------------------------------------------------------------ status

STATUS_MAX_LAG_SECONDS: Key[float] = Key(
    name="s3events.status.max.lag.seconds",
    type=FloatType(min=0),
    default=3600.0,
    doc="`s3events status` reports a target as lagging (and exits 1) when the oldest metadata change "
    "routed to it and not yet ingested is more than this many seconds old.",
    group="Status",
)

STATUS_MAX_CAPTURE_STALL_SECONDS: Key[float] = Key(
    name="s3events.status.max.capture.stall.seconds",
    type=FloatType(min=0),
    default=900.0,
    doc="`s3events status` reports capture as stalled (and exits 1) when the queue holds visible messages "
    "and neither the metadata nor the quarantine table has had a commit for this many seconds: a running "
    "capture commits within seconds of a message arriving (SQS has no oldest-message-age attribute).",
    group="Status",
)

# ------------------------------------------------------------------------------------------------- setup

_QUEUE_NAME = StrType(pattern=r"[A-Za-z0-9_-]{1,80}", pattern_doc="a queue name (1-80 of A-Z a-z 0-9 _ -)")
# The event types S3 can send to a queue (capture records created and removed events, ignores the rest).
_S3_EVENT_TYPES = (
    "s3:ObjectCreated:*",
    "s3:ObjectCreated:Put",
    "s3:ObjectCreated:Post",
    "s3:ObjectCreated:Copy",
    "s3:ObjectCreated:CompleteMultipartUpload",
    "s3:ObjectRemoved:*",
    "s3:ObjectRemoved:Delete",
    "s3:ObjectRemoved:DeleteMarkerCreated",
    "s3:ObjectRestore:*",
    "s3:ObjectRestore:Post",
    "s3:ObjectRestore:Completed",
    "s3:ObjectRestore:Delete",
    "s3:LifecycleExpiration:*",
    "s3:LifecycleExpiration:Delete",
    "s3:LifecycleExpiration:DeleteMarkerCreated",
    "s3:ObjectTagging:*",
    "s3:ObjectTagging:Put",
    "s3:ObjectTagging:Delete",
)


def _queue_url_part(settings: SettingsView, index: int) -> str | None:
    """The account (-2) or the name (-1) in the queue URL https://host/<account>/<name>."""
    parts = (settings.get(QUEUE_URL) or "").rstrip("/").split("/")
    return parts[index] if len(parts) >= 5 else None


def _dead_letter_default(settings: SettingsView, _target: str | None) -> str | None:
    name = _queue_url_part(settings, -1)
    return f"{name}-dlq" if name else None


def _bucket_account_default(settings: SettingsView, _target: str | None) -> str | None:
    return _queue_url_part(settings, -2)


def _probe_prefix_default(settings: SettingsView, _target: str | None) -> str | None:
    prefixes = settings.get(SETUP_PREFIXES)
    return f"{prefixes[0] if prefixes else ''}_s3events_probe/"


SETUP_BUCKETS: Key[tuple[str, ...]] = Key(
    name="s3events.setup.buckets",
    type=ListType(item=StrType(pattern=_BUCKET.pattern, pattern_doc="S3 bucket names"), unique=True),
    default=(),
    doc="Buckets whose object events `s3events setup` sends to the queue of s3events.source.queue.url "
    "(it creates no bucket).",
    required_for=_SETUP,
    group="Setup",
)
SETUP_PREFIXES: Key[tuple[str, ...]] = Key(
    name="s3events.setup.prefixes",
    type=ListType(unique=True),
    default=(),
    doc="Key prefixes the bucket notifications cover, one notification configuration per prefix and "
    "suffix (empty = every key); they may not overlap each other.",
    group="Setup",
)
SETUP_SUFFIXES: Key[tuple[str, ...]] = Key(
    name="s3events.setup.suffixes",
    type=ListType(unique=True),
    default=(),
    doc="Key suffixes the bucket notifications cover, e.g. .json,.csv (empty = any ending).",
    group="Setup",
)
SETUP_EVENTS: Key[tuple[str, ...]] = Key(
    name="s3events.setup.events",
    type=ListType(item=ChoiceType(_S3_EVENT_TYPES), unique=True),
    default=("s3:ObjectCreated:*", "s3:ObjectRemoved:*"),
    doc="S3 event types the notifications send (capture records created and removed objects).",
    group="Setup",
)
SETUP_DEAD_LETTER_QUEUE_NAME: Key[str | None] = Key(
    name="s3events.setup.dead.letter.queue.name",
    type=_QUEUE_NAME,
    default_from=_dead_letter_default,
    default_text="<queue name>-dlq",
    doc="Dead-letter queue setup creates and names in the queue's redrive policy, in the queue's account "
    "and region.",
    group="Setup",
)
SETUP_DEAD_LETTER_MAX_RECEIVE_COUNT: Key[int] = Key(
    name="s3events.setup.dead.letter.max.receive.count",
    type=IntType(min=1, max=1000),
    default=5,
    doc="Receives after which SQS moves a message to the dead-letter queue (redrive maxReceiveCount); "
    "poison messages take this path with s3events.source.poison.action=redrive.",
    group="Setup",
)
SETUP_BUCKET_ACCOUNT: Key[str | None] = Key(
    name="s3events.setup.bucket.account",
    type=StrType(pattern=r"[0-9]{12}", pattern_doc="a 12-digit AWS account id"),
    default_from=_bucket_account_default,
    default_text="the account in s3events.source.queue.url",
    doc="Account that owns the buckets: the queue policy lets S3 send only for this aws:SourceAccount.",
    group="Setup",
)
SETUP_PROBE_PREFIX: Key[str | None] = Key(
    name="s3events.setup.probe.prefix",
    type=StrType(),
    default_from=_probe_prefix_default,
    default_text="<first of s3events.setup.prefixes>_s3events_probe/",
    doc="`s3events setup --verify` writes (and deletes) a small probe object under this prefix; it must "
    "lie inside one of s3events.setup.prefixes, and targets should ignore it.",
    group="Setup",
)
SETUP_VERIFY_TIMEOUT_SECONDS: Key[float] = Key(
    name="s3events.setup.verify.timeout.seconds",
    type=FloatType(min=1, max=900),
    default=60.0,
    doc="How long `s3events setup --verify` waits for the probe's event to arrive on the queue.",
    group="Setup",
)

# ------------------------------------------------------------------------------------------- catalog

CATALOG_TYPE: Key[CatalogType] = Key(
    name="s3events.catalog.type",
    type=ChoiceType(get_args(CatalogType)),
    default="none",
    doc="Catalog ingest registers its target tables in: none, glue (AWS Glue Data Catalog, read by Athena, "
    "EMR, Glue) or hive (a Hive metastore over Thrift); created at a target's first commit, updated when "
    "its schema or partition columns change.",
    group="Catalog",
)
CATALOG_DATABASE: Key[str | None] = Key(
    name="s3events.catalog.database",
    type=_CATALOG_NAME,
    doc="Database (schema) the target tables are registered in; `s3events setup` creates it. Required "
    "unless s3events.catalog.type=none.",
    group="Catalog",
)
CATALOG_HIVE_METASTORE_URI: Key[str | None] = Key(
    name="s3events.catalog.hive.metastore.uri",
    type=StrType(pattern=r"thrift://[^/\s:]+:[0-9]{1,5}", pattern_doc="thrift://host:port"),
    doc="Hive metastore's Thrift address, e.g. thrift://metastore:9083. Required with "
    "s3events.catalog.type=hive.",
    group="Catalog",
)

_SINGLE_READER = (
    "text and Parquet have a single reader (every file is read on the executors by the same parser), so "
    "there is no other path to switch to"
)
REMOVED = (
    Removed(_TARGET + "text.fast.path", _SINGLE_READER),
    Removed(_TARGET + "parquet.fast.path", _SINGLE_READER),
)
"""Keys that no longer exist: setting one fails at start-up, saying why."""

REGISTRY = Registry((value for value in list(globals().values()) if isinstance(value, Key)), REMOVED)
"""Every key above, in declaration order."""
