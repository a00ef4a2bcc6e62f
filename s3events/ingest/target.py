"""One target table's settings, read once at start-up into a frozen spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from s3events.config import Settings, keys
from s3events.ingest.deletes import DeleteRule
from s3events.ingest.files.key_columns import KeyColumns
from s3events.ingest.model import Limits
from s3events.ingest.plan import Route


@dataclass(frozen=True, slots=True)
class TargetSpec:
    name: str
    path: str
    format: keys.TargetFormat
    route: Route
    limits: Limits
    error_table_path: str
    schema_ddl: str | None = None
    reader_options: Mapping[str, str] | None = None
    json_fast_path: bool = True
    csv_fast_path: bool = True
    driver_read_max_bytes: int = 64 << 20  # fast-path batches up to this size skip the Spark job
    binary_max_bytes: int = 16 << 20
    mode: keys.TargetMode = "append"
    record_key: tuple[str, ...] = ()
    ordering_field: str | None = None
    delete: DeleteRule | None = None  # merge mode's record deletes (delete.field)
    partition_by: tuple[str, ...] = ()
    key_columns: KeyColumns | None = None  # columns from the object key (key.pattern, key.columns)
    schema_evolution: keys.SchemaEvolution = "add"
    rescued_column: str | None = None  # rescued.column; _rescued_data under schema.evolution=rescue
    on_missing_object: keys.OnMissingObject = "skip"
    on_object_removed: keys.OnObjectRemoved = "ignore"
    transform_sql: str | None = None  # the transform.sql value (transform.TransformSpec reads both)
    transform_sql_file: str | None = None
    schema_hints: Mapping[str, str] | None = None  # schema.hints: name -> canonical Spark DDL type
    infer_types: bool = True  # schema.infer.types
    schema_file: str | None = None  # schema.file, read into schema_ddl at start-up (schema_file.py)

    @property
    def fast_path(self) -> bool:
        """Whether this target's format may take the fast path."""
        return {
            "json": self.json_fast_path,
            "csv": self.csv_fast_path,
            "text": True,  # one path: `formats/base.SinglePathParser`
            "parquet": True,
            "avro": True,  # no switch: the fast path reads these as the Spark path does (whole_fast.py)
            "orc": True,
            "binary": True,
            "xml": True,  # its records go to the JSON fast parser (formats/records_fast.py)
        }.get(self.format, False)

    @property
    def app_id(self) -> str:
        """The Delta app-transaction id of this target's checkpoint."""
        return f"s3events.ingest/{self.name}"


def _key_columns(settings: Settings, name: str) -> KeyColumns | None:
    pattern = settings.get_for(name, keys.TARGET_KEY_PATTERN)
    hive = settings.get_for(name, keys.TARGET_KEY_COLUMNS)
    if not pattern and not hive:
        return None
    return KeyColumns(
        pattern=pattern,
        hive=hive,
        types=tuple(settings.get_for(name, keys.TARGET_KEY_COLUMN_TYPES).items()),
        required=settings.get_for(name, keys.TARGET_KEY_COLUMNS_REQUIRED),
    )


def _rescued_column(settings: Settings, name: str) -> str | None:
    rescue = settings.get_for(name, keys.TARGET_SCHEMA_EVOLUTION) == "rescue"
    return settings.get_for(name, keys.TARGET_RESCUED_COLUMN) or ("_rescued_data" if rescue else None)


def _delete_rule(settings: Settings, name: str) -> DeleteRule | None:
    field = settings.get_for(name, keys.TARGET_DELETE_FIELD)
    if not field:
        return None
    values = settings.get_for(name, keys.TARGET_DELETE_VALUES)
    return DeleteRule(field, values, keep=settings.get_for(name, keys.TARGET_DELETE_FIELD_KEEP))


def target_specs(settings: Settings, only: tuple[str, ...] = ()) -> list[TargetSpec]:
    names = only or settings.targets
    specs = []
    for name in names:
        if name not in settings.targets:
            from s3events.errors import ConfigError

            raise ConfigError(
                "--target", f"{name!r} is not a declared target; declared: {', '.join(settings.targets)}"
            )
        specs.append(
            TargetSpec(
                name=name,
                path=settings.require_for(name, keys.TARGET_PATH),
                format=settings.require_for(name, keys.TARGET_FORMAT),
                route=Route(
                    bucket=settings.get_for(name, keys.TARGET_BUCKET),
                    key_prefix=settings.get_for(name, keys.TARGET_KEY_PREFIX),
                    ignore_prefixes=settings.get_for(name, keys.TARGET_IGNORE_PREFIX),
                    ignore_substrings=settings.get_for(name, keys.TARGET_IGNORE_SUBSTRING),
                    glob=settings.get_for(name, keys.TARGET_GLOB),
                ),
                limits=Limits(
                    max_files=settings.get_for(name, keys.TARGET_MAX_FILES_PER_BATCH),
                    max_bytes=settings.get_for(name, keys.TARGET_MAX_BYTES_PER_BATCH),
                ),
                error_table_path=settings.require_for(name, keys.TARGET_ERROR_TABLE_PATH),
                schema_ddl=settings.get_for(name, keys.TARGET_SCHEMA),
                reader_options=dict(settings.get_for(name, keys.TARGET_READER_OPTIONS)),
                json_fast_path=settings.get_for(name, keys.TARGET_JSON_FAST_PATH),
                csv_fast_path=settings.get_for(name, keys.TARGET_CSV_FAST_PATH),
                driver_read_max_bytes=settings.get_for(name, keys.TARGET_DRIVER_READ_MAX_BYTES),
                binary_max_bytes=settings.get_for(name, keys.TARGET_BINARY_MAX_BYTES),
                mode=settings.get_for(name, keys.TARGET_MODE),
                record_key=settings.get_for(name, keys.TARGET_RECORD_KEY),
                ordering_field=settings.get_for(name, keys.TARGET_ORDERING_FIELD),
                delete=_delete_rule(settings, name),
                partition_by=settings.get_for(name, keys.TARGET_PARTITION_BY),
                key_columns=_key_columns(settings, name),
                schema_evolution=settings.get_for(name, keys.TARGET_SCHEMA_EVOLUTION),
                rescued_column=_rescued_column(settings, name),
                on_missing_object=settings.get_for(name, keys.TARGET_ON_MISSING_OBJECT),
                on_object_removed=settings.get_for(name, keys.TARGET_ON_OBJECT_REMOVED),
                transform_sql=settings.get_for(name, keys.TARGET_TRANSFORM_SQL),
                transform_sql_file=settings.get_for(name, keys.TARGET_TRANSFORM_SQL_FILE),
                schema_hints=settings.get_for(name, keys.TARGET_SCHEMA_HINTS) or None,
                infer_types=settings.get_for(name, keys.TARGET_SCHEMA_INFER_TYPES),
                schema_file=settings.get_for(name, keys.TARGET_SCHEMA_FILE),
            )
        )
    return specs
