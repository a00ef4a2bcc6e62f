"""Ingest: metadata-table changes → referenced files → target Delta tables. plan → read → write+checkpoint."""
