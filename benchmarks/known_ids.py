"""Does capture's duplicate check in memory stay flat as commits accumulate within the hour?

    .venv/bin/python benchmarks/known_ids.py [--commits 20000] [--marks 1000,5000,10000,20000]
        [--ids-per-commit 6] [--repeat 50]

`KnownIds` (s3events/metadata/known_ids.py) as capture uses it: each commit asks `may_hold_any` of its
batch's ids and then `add`s them. Ids added within the hour stay in the open chunk until it holds
SEAL_IDS of them, so a capture committing small batches often holds thousands of commits' ids there.
At each mark: the median `may_hold_any` of a batch of new ids and the median `add` of one, with their
ratio to the first mark, measured in the same run. Pure Python and NumPy: no table, no endpoint.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa

from benchmarks.harness import Run, add_common, int_list, median, smoke
from benchmarks.harness.timing import timed
from s3events.metadata.known_ids import KnownIds


class Batches:
    """Batches of new SHA-256 ids, as `ObjectEvent.event_id` makes them."""

    def __init__(self, size: int) -> None:
        self.size, self.n = size, 0

    def __call__(self) -> pa.Array:
        start, self.n = self.n, self.n + self.size
        return pa.array([hashlib.sha256(str(i).encode()).hexdigest() for i in range(start, self.n)])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--marks", type=int_list, default=[1000, 5000, 10_000, 20_000])
    parser.add_argument("--ids-per-commit", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=50)
    add_common(parser)
    args = parser.parse_args()
    smoke(args, commits=200, marks=[100, 200], repeat=5)
    run = Run.start("known_ids", smoke=args.smoke)
    now = datetime.now(UTC)  # one instant: the hour never passes, only the size seals the open chunk
    known = KnownIds(version=0, floor=None, skew=timedelta(0))
    batch = Batches(args.ids_per_commit)
    rows = []
    for commit in range(1, args.commits + 1):
        if commit in args.marks:
            probe = batch()
            check = median(timed(lambda: known.may_hold_any(probe), args.repeat))  # noqa: B023
            added = median(
                timed(lambda: known.add(batch(), version=commit, now=now), args.repeat)  # noqa: B023
            )
            rows.append((commit, len(known), check * 1000, added * 1000))
        known.add(batch(), version=commit, now=now)
    base = rows[0]
    print("| commits | ids held | may_hold_any ms | add ms | check / first | add / first |")
    print("|---|---|---|---|---|---|")
    for commit, held, check_ms, add_ms in rows:
        ratios = (round(check_ms / base[2], 2), round(add_ms / base[3], 2))
        print(
            f"| {commit:,} | {held:,} | {check_ms:.3f} | {add_ms:.3f} | {ratios[0]:.2f} | {ratios[1]:.2f} |"
        )
        figures = {"may_hold_any_ms": round(check_ms, 3), "add_ms": round(add_ms, 3), "ids_held": held}
        figures |= {"check_vs_first_x": ratios[0], "add_vs_first_x": ratios[1]}
        params = {"commits": commit, "ids_per_commit": args.ids_per_commit, "repeat": args.repeat}
        run.add(f"{commit:,} commits of {args.ids_per_commit} ids", params=params, figures=figures)
    run.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
