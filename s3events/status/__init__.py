"""`s3events status`: a health check and an operator's view of the whole pipeline.

```bash
s3events status --props conf/s3events.properties           # aligned table on stdout
s3events status --props conf/s3events.properties --json    # one JSON document on stdout
```

It reads, never writes: the queue's depth (SQS attributes), the metadata and quarantine tables' version,
row count (from file statistics, no data scan) and newest commit time, and per target
(`s3events.ingest.targets`) the checkpoint stored in the target table's Delta app transactions, the lag
behind the metadata table, the target and error tables' version and row count, and the newest error row.
Spark is not started. A table that does not exist yet is reported as such ("does not exist yet").

Lag of a target: its oldest pending version O is the first metadata version after its stored checkpoint
(version V, position P) that holds an entry routed to it. Ingest commits only real batches, so a quiet
target's stored V can be old while nothing is pending: the change feed after V is read to find O.
- `lag_versions` = latest metadata version - O + 1 (0 when nothing is pending; a target with no
  checkpoint starts from V = -1, or is caught up under `s3events.ingest.missing.checkpoint.strategy=latest`,
  which starts it at whatever is latest when it first runs and records that point in its error table);
- `lag_seconds` = now - the commit time of metadata version O (0 when nothing is pending). If the log
  no longer holds that commit, the oldest commit it still holds is used: a lower bound.

Exit code (`Status.exit_code`): 1 when there is any problem — a target's `lag_seconds` exceeds
`s3events.status.max.lag.seconds`, a checkpoint is ahead of the metadata table, or the queue or a table
cannot be read — else 0. A table that does not exist yet is not a problem. Configuration errors exit 2
as for every command.

JSON document (`--json`); times are ISO 8601 UTC strings ending in `Z`, absent values are `null`:

```
{
  "generated_at": "2025-06-01T12:00:00.000000Z",
  "healthy": false,                      # false exactly when "problems" is not empty (exit code 1)
  "max_lag_seconds": 3600.0,
  "problems": ["target b: 5400.0 s behind the metadata table (max 3600.0 s)"],
  "queue": null | {"url": "...", "visible": 3, "in_flight": 0, "error": null},
  "metadata": TABLE,
  "quarantine": null | TABLE,
  "targets": [
    {
      "name": "a",
      "checkpoint": null | {"version": 7, "position": 0},
      "lag_versions": 0,                 # null when the metadata table or the checkpoint is unreadable
      "lag_seconds": 0.0,                # idem
      "oldest_pending_version": null,    # V + 1 while the target is behind
      "oldest_pending_commit_at": null,  # its commit time
      "lagging": false,                  # lag_seconds > max_lag_seconds
      "table": TABLE,
      "error_table": TABLE,
      "last_error": null | {"error": "not valid JSON", "file": "s3://bucket/key", "line": 12,
                            "ingested_at": "..."},
      "error": null,                     # why the checkpoint could not be read
      "refused": null | "target t: schema.evolution=fail: s3://bucket/key line 2 has new field(s) …",
                                         # schema.evolution=fail: why the batch at its checkpoint was refused
      "transform": null | {"identity": "sha256:…", "rows_filtered": 3, "version": 12, "error": null}
                                         # a target with a transform: its newest batch commit's record
    }
  ]
}
TABLE = {"path": "...", "exists": true, "version": 12, "rows": 3400, "rows_exact": true,
         "last_commit_at": "...", "files": 3, "small_files": 1, "last_maintained_at": "..." | null,
         "error": null}
```
`rows_exact` is false when some data file carries no row count in its statistics (`rows` is then a lower
bound); `exists` is false (and the numbers null) for a table that does not exist yet; `error` holds why a
table could not be read.

The package: `model` (the records), `gather` (reads them), `render` (shows them).
"""
