#!/usr/bin/env bash
# Every benchmark at its --smoke sizes: a check that each still runs end to end (CI runs this after
# `make lint`). Smoke results go to the git-ignored benchmarks/results/smoke/; their figures mean nothing.
#   benchmarks/smoke.sh            # all of them, a few minutes on 2 cores
#   benchmarks/smoke.sh freshness  # some of them
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
ALL=(log_listing bucket_layout batch_overhead long_run capture_throughput cycle_cost ingest_throughput
     merge_scale bootstrap freshness chaos transform_cost known_ids csv_parse jvm_start)
failed=()
for name in "${@:-${ALL[@]}}"; do
    started=$SECONDS
    if "$PYTHON" -m "benchmarks.$name" --smoke >"/tmp/s3events-smoke-$name.log" 2>&1; then
        echo "smoke: $name ok ($((SECONDS - started)) s)"
    else
        echo "smoke: $name FAILED ($((SECONDS - started)) s); the last lines of its output:"
        tail -20 "/tmp/s3events-smoke-$name.log"
        failed+=("$name")
    fi
done
"$PYTHON" -m benchmarks.report --check
if ((${#failed[@]})); then
    echo "smoke: failed: ${failed[*]}"
    exit 1
fi
