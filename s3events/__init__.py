"""s3events: exactly-once ingestion of S3 files into Delta Lake tables, driven by S3 event notifications."""

__version__ = "0.1.0"
