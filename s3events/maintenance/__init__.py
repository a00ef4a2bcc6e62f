"""Table maintenance: what keeps a table's commit and read cost flat over months of small commits.

One pass over a table (`table.maintain`): 1 restate the files whose statistics could mislead a reader
(`statistics`) → 2 compact small files (bin-packing, `dataChange=false`, so change feed readers neither
see compacted rows again nor miss any) → 3 checkpoint when enough commits followed the last one → 4 log
cleanup behind the checkpoint → 5 vacuum files no version needs any more → 6 record the pass (app
transaction `s3events.maintenance` = epoch seconds). Log cleanup and vacuum keep whatever a
lagging ingest target still needs from the metadata table (`model.keep_since`).

Each process maintains the tables it writes, between its own cycles (`periodic.PeriodicMaintenance`):
capture the metadata and quarantine tables, ingest its targets and their error tables; `s3events
maintain` runs a pass on demand. Other writers committing meanwhile cost a retry, never a row.
"""
