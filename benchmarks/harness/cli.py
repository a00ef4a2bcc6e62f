"""Options every benchmark takes."""

from __future__ import annotations

import argparse


def add_common(parser: argparse.ArgumentParser) -> None:
    """`--smoke`: every phase of the benchmark at the smallest sizes, in seconds, results written to
    benchmarks/results/smoke/ (a check that it runs; its figures mean nothing)."""
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="run every phase at tiny sizes in seconds (results go to benchmarks/results/smoke/)",
    )


def smoke(args: argparse.Namespace, **sizes: object) -> None:
    """With --smoke, set `sizes` on args (the tiny sizes of this benchmark)."""
    if args.smoke:
        for name, value in sizes.items():
            setattr(args, name, value)


def int_list(text: str) -> list[int]:
    """An option's comma-separated integers (`--marks 1000,5000`), as argparse's `type`."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
