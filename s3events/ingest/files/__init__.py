"""Step 2 of an ingest batch, on Spark executors: fetch the objects, parse them (fast path or line path),
write Parquet."""
