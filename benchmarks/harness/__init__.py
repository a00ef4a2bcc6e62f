"""What every benchmark shares: endpoints, timing and CPU by process, memory sampling, percentiles,
and results written as JSON lines (`Run`). Scripts use only the public names of the s3events package."""

from benchmarks.harness.cli import add_common, int_list, smoke
from benchmarks.harness.procs import Measure, MemorySampler, cpu_by_process, rss_bytes
from benchmarks.harness.results import Run, load_average, load_text
from benchmarks.harness.stats import median, percentile, ratio

__all__ = [
    "Measure",
    "MemorySampler",
    "Run",
    "add_common",
    "cpu_by_process",
    "int_list",
    "load_average",
    "load_text",
    "median",
    "percentile",
    "ratio",
    "rss_bytes",
    "smoke",
]
