"""The commands of `s3events`: each one's arguments and how it runs, in one table (`COMMANDS`) that the
parser is built from and `cli.run` dispatches on. A command returns its exit code; errors of our own
hierarchy are `cli.run`'s to map.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from s3events.config import Settings, keys, load_settings

if TYPE_CHECKING:
    from s3events.maintenance.model import TableToMaintain
    from s3events.process_metrics import Metrics

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG, EXIT_FATAL = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]  # adds the command's own arguments
    run: Callable[[argparse.Namespace, ExitStack], int]  # the ExitStack closes when the command ends
    settings: bool = True  # takes --props and --conf


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--props", metavar="FILE", help="a Java-style .properties file of s3events.* keys")
    parser.add_argument(
        "--conf", metavar="KEY=VALUE", action="append", default=[], help="override one key (repeatable)"
    )


def _add_mode_args(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--once", action="store_true", help="drain what is there, then exit")
    mode.add_argument("--continuous", action="store_true", help="run until SIGTERM/SIGINT")
    parser.add_argument(
        "--min-sync-interval-seconds",
        type=float,
        metavar="N",
        help="continuous mode: minimum seconds between cycles (overrides the properties)",
    )


def configure_logging(level: str, log_format: str = "text") -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    if log_format == "json":
        from s3events.observe.json_log import JsonFormatter

        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
    # Third-party chatter at INFO drowns the one line per cycle.
    for noisy in ("botocore", "boto3", "urllib3", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _load(args: argparse.Namespace, command: str) -> Settings:
    settings = load_settings(args.props, args.conf)
    settings.validate_for(command)
    configure_logging(settings.get(keys.LOG_LEVEL), settings.get(keys.LOG_FORMAT))
    return settings


def _observe(settings: Settings, cleanup: ExitStack) -> Metrics:
    """This process's metrics, served on s3events.metrics.port while the command runs (0: not served)."""
    from s3events.observe.server import serve
    from s3events.process_metrics import Metrics

    metrics = Metrics()
    port = settings.get(keys.METRICS_PORT)
    if port:
        cleanup.callback(serve(metrics, host=settings.get(keys.METRICS_HOST), port=port).close)
    return metrics


def _maintenance(
    settings: Settings, tables: Sequence[TableToMaintain], *, once: bool, metrics: Metrics | None = None
) -> Callable[[], object] | None:
    """Table maintenance between cycles of a --continuous run (--once runs are cron style: schedule
    `s3events maintain` beside them)."""
    from s3events.maintenance.service import PeriodicMaintenance

    periodic = None if once else PeriodicMaintenance.from_settings(settings, tables)
    if periodic is None:
        return None
    if metrics is None:
        return periodic.run_if_due
    return lambda: metrics.maintenance.record(periodic.run_if_due())


def _capture_arguments(parser: argparse.ArgumentParser) -> None:
    _add_mode_args(parser)


def _capture(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events import preflight
    from s3events.capture.service import run_capture
    from s3events.maintenance.service import capture_tables
    from s3events.runloop import StopFlag

    settings = _load(args, "capture")
    preflight.check(
        settings, preflight.capture_locations(settings), queue_url=settings.require(keys.QUEUE_URL)
    )
    stop = StopFlag()
    stop.install_signal_handlers()
    metrics = _observe(settings, cleanup)
    run_capture(
        settings,
        once=args.once,
        min_interval_seconds=args.min_sync_interval_seconds,
        stop=stop,
        housekeeping=_maintenance(settings, capture_tables(settings), once=args.once, metrics=metrics),
        metrics=metrics,
    )
    return EXIT_OK


def _ingest_arguments(parser: argparse.ArgumentParser) -> None:
    _add_mode_args(parser)
    parser.add_argument(
        "--target", action="append", default=[], metavar="NAME", help="ingest only this target (repeatable)"
    )
    parser.add_argument(
        "--checkpoint",
        type=int,
        metavar="VERSION",
        help="treat metadata versions <= VERSION as ingested and start after it (never moves backwards)",
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="delete the --target tables and error tables; ingest rebuilds them from the metadata snapshot",
    )
    parser.add_argument("--yes", action="store_true", help="confirm --rebuild")


def _ingest(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events import preflight
    from s3events.infra.spark import require_java
    from s3events.ingest.service import run_ingest
    from s3events.maintenance.service import ingest_tables
    from s3events.runloop import StopFlag

    settings = _load(args, "ingest")
    preflight.check(settings, preflight.ingest_locations(settings, args.target))  # before Spark
    require_java()
    if args.rebuild:
        from s3events.ingest.rebuild import rebuild_targets

        rebuild_targets(settings, args.target, confirmed=args.yes, checkpoint=args.checkpoint)
    stop = StopFlag()
    stop.install_signal_handlers()
    metrics = _observe(settings, cleanup)
    totals = run_ingest(
        settings,
        once=args.once,
        targets=tuple(args.target),
        start_at=args.checkpoint,
        min_interval_seconds=args.min_sync_interval_seconds,
        stop=stop,
        housekeeping=_maintenance(
            settings, ingest_tables(settings, args.target), once=args.once, metrics=metrics
        ),
        metrics=metrics,
        catalog_metrics=metrics.catalog if settings.get(keys.CATALOG_TYPE) != "none" else None,
    )
    if totals.failed:
        for target, reason in sorted(totals.failed.items()):
            print(f"s3events: target {target} failed: {reason}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _backfill_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="S3_URI",
        help="list s3://bucket or s3://bucket/prefix (repeatable; default: s3events.backfill.sources)",
    )
    parser.add_argument(
        "--since", metavar="ISO8601", help="only objects last modified at or after this time (naive = UTC)"
    )
    parser.add_argument(
        "--until", metavar="ISO8601", help="only objects last modified before this time (naive = UTC)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the counts and the first keys; write nothing"
    )


def _backfill(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events import preflight
    from s3events.backfill.command import backfill_request
    from s3events.backfill.progress import terminal_progress
    from s3events.backfill.run import run_backfill
    from s3events.runloop import StopFlag

    request = backfill_request(args.source, since=args.since, until=args.until, dry_run=args.dry_run)
    args.conf = [*args.conf, *request.conf_overrides]
    settings = _load(args, "backfill")
    writes = not request.options.dry_run
    preflight.check(settings, preflight.backfill_locations(settings, writes=writes))
    stop = StopFlag()
    stop.install_signal_handlers()
    backfilled = run_backfill(
        settings,
        sources=request.sources,
        options=request.options,
        progress=terminal_progress(sys.stderr),  # None unless stderr is a terminal
        stop=stop.is_set,
        metrics=_observe(settings, cleanup),
    )
    print("\n".join(backfilled.summary_lines()))
    if backfilled.interrupted:
        print("s3events: backfill stopped by a signal before it completed", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")


def _status(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from datetime import UTC, datetime

    from s3events import preflight
    from s3events.status.gather import gather_status
    from s3events.status.render import render_json, render_text

    settings = _load(args, "status")
    # A health check reports the state now: one attempt, no waiting for an endpoint to come back.
    preflight.check(settings, preflight.status_locations(settings), timeout_seconds=0)
    report = gather_status(settings, now=datetime.now(UTC))
    print(render_json(report) if args.json else render_text(report))
    return report.exit_code


def _maintain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--table",
        default="all",
        metavar="TABLE",
        help="metadata | quarantine | target:NAME (with its error table) | all (default)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what a pass would do; change nothing")


def _maintain(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events import preflight
    from s3events.maintenance.service import run_maintenance, select_tables

    settings = _load(args, "maintain")
    tables = select_tables(settings, args.table)
    preflight.check(settings, preflight.maintain_locations(tables))
    reports = run_maintenance(settings, tables, dry_run=args.dry_run)
    print("\n".join(r.line() for r in reports))
    if any(r.error for r in reports):
        return EXIT_FAILURE
    return EXIT_OK


def _migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print what it would do; change nothing")
    parser.add_argument(
        "--force", action="store_true", help="migrate even though the table was committed to within a minute"
    )


def _migrate(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from datetime import UTC, datetime

    from s3events import preflight
    from s3events.infra import aws
    from s3events.maintenance.service import select_tables
    from s3events.metadata.migrate import migrate

    settings = _load(args, "migrate")
    tables = select_tables(settings, "metadata")
    preflight.check(settings, preflight.maintain_locations(tables))
    migration = migrate(
        settings.require(keys.METADATA_TABLE_PATH),
        aws.FreshStorageOptions(aws.options_from(settings)),
        now=datetime.now(UTC),
        dry_run=args.dry_run,
        force=args.force,
    )
    print(migration.line())
    return EXIT_OK


def _setup_arguments(parser: argparse.ArgumentParser) -> None:
    setup_mode = parser.add_mutually_exclusive_group()
    setup_mode.add_argument("--dry-run", action="store_true", help="print the plan; call no write API")
    setup_mode.add_argument(
        "--verify", action="store_true", help="check each link, send a probe object through; exit 1 if broken"
    )


def _setup(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events.setup.command import run_setup, run_verify

    settings = _load(args, "setup")
    if args.verify:
        return run_verify(settings, out=sys.stdout)
    return run_setup(settings, dry_run=args.dry_run, out=sys.stdout)


def _teardown_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="confirm the removal")
    parser.add_argument("--dry-run", action="store_true", help="print what would be removed; change none")


def _teardown(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events.setup.command import run_teardown

    settings = _load(args, "teardown")
    return run_teardown(settings, yes=args.yes, dry_run=args.dry_run, out=sys.stdout, err=sys.stderr)


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default="demo-data", help="where the demo's Delta tables go")
    parser.add_argument("--files", type=int, default=20, help="how many sample files to PUT")


def _demo(args: argparse.Namespace, cleanup: ExitStack) -> int:
    from s3events.dev.demo import run_demo

    return run_demo(data_dir=args.data_dir, files=args.files)


COMMANDS: dict[str, Command] = {
    "capture": Command("SQS S3 events → metadata Delta table (deduplicated)", _capture_arguments, _capture),
    "ingest": Command(
        "metadata table changes → referenced files → target Delta tables", _ingest_arguments, _ingest
    ),
    "backfill": Command(
        "S3 listing → events the metadata table lacks (one pass)", _backfill_arguments, _backfill
    ),
    "status": Command(
        "queue depth, tables and per-target lag; exit 1 when unhealthy (a health check)",
        _status_arguments,
        _status,
    ),
    "maintain": Command(
        "one maintenance pass now: compact, checkpoint, clean up the log, vacuum",
        _maintain_arguments,
        _maintain,
    ),
    "migrate": Command(
        "rewrite a metadata table of schema version 1 into identity buckets (writers stopped)",
        _migrate_arguments,
        _migrate,
    ),
    "setup": Command(
        "create or repair the notification path: queues, queue policy, bucket notifications",
        _setup_arguments,
        _setup,
    ),
    "teardown": Command(
        "remove what `s3events setup` created (asks for --yes)", _teardown_arguments, _teardown
    ),
    "demo": Command(
        "run the pipeline end to end on an embedded local S3/SQS endpoint",
        _demo_arguments,
        _demo,
        settings=False,
    ),
}
