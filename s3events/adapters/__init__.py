"""Adapters: the only modules that import boto3, deltalake or pyspark. Each is shaped like what it wraps."""
