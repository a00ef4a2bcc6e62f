"""Shared plumbing of every flow: AWS clients and credentials, Delta open/create/commit, the Spark session."""
