"""Backfill: list S3 sources, find the objects the metadata table does not know, write them as events.

    from s3events.backfill.model import BackfillOptions, TimeWindow, parse_time
    from s3events.backfill.run import run_backfill
    window = TimeWindow(since=parse_time("2026-01-01T00:00:00Z"))
    report = run_backfill(settings, options=BackfillOptions(window=window))
    print("\\n".join(report.summary_lines()))

One pass (`run.py`): 1 list → 2 diff → 3 write → 4 record completion. `periodic.py` runs a pass inside
capture every `s3events.backfill.interval.seconds`.
"""
