"""Registration of target tables in a catalog (AWS Glue or a Hive metastore), after ingest's commits."""
