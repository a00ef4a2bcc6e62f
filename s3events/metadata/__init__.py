"""The metadata table (one row per object event) and its quarantine table: written by capture and backfill."""
