"""Benchmarks of s3events: each script measures one thing against a baseline run in the same process
tree, prints ratios, and appends its results to `benchmarks/results/<name>.jsonl` (the record the
performance tables in README.md and docs/performance.md are generated from: `python -m benchmarks.report`)."""
