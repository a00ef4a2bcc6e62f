"""The `s3events` command. The library logs; this module configures logging and owns the exit path.

Exit codes: 0 success, 1 runtime failure, 2 configuration or usage error, 3 fatal environment error
(access denied, missing queue or bucket, unwritable table location, no Java): something a person has to
fix. Errors of our own hierarchy print one line; their traceback is logged at DEBUG only.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from contextlib import ExitStack

from s3events import __version__
from s3events.commands import (
    COMMANDS,
    EXIT_CONFIG,
    EXIT_FAILURE,
    EXIT_FATAL,
    add_config_args,
    configure_logging,
)
from s3events.errors import CheckpointError, ConfigError, FatalError, TransientError

log = logging.getLogger("s3events")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="s3events",
        description="Exactly-once ingestion of S3 files into Delta Lake tables, "
        "driven by S3 event notifications.",
    )
    parser.add_argument("--version", action="version", version=f"s3events {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(name, help=command.help)
        if command.settings:
            add_config_args(command_parser)
        command.arguments(command_parser)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Parse, run, and map every outcome to an exit code. Never calls sys.exit (tests call this)."""
    args = build_parser().parse_args(argv)
    configure_logging("INFO")
    cleanup = ExitStack()  # the metrics endpoint, when one is served
    try:
        return COMMANDS[args.command].run(args, cleanup)
    except ConfigError as exc:
        print(f"s3events: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except CheckpointError as exc:
        print(f"s3events: checkpoint refused: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except FatalError as exc:
        log.debug("s3events %s: fatal error", args.command, exc_info=True)
        print(f"s3events: fatal: {exc}", file=sys.stderr)
        return EXIT_FATAL
    except TransientError as exc:  # --once: retrying is the next run's job (or the scheduler's)
        log.debug("s3events %s: transient error", args.command, exc_info=True)
        print(f"s3events: failed, may succeed when retried: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception:
        log.exception("s3events %s failed", args.command)
        return EXIT_FAILURE
    finally:
        cleanup.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry. Exits without interpreter teardown: delta-rs/pyarrow can abort (SIGABRT)
    during teardown after all work succeeded, which would replace our true exit code."""
    try:
        code = run(argv)
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        code = exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
