"""The lake and what reads it: Parquet tables, their schemas, the DuckDB catalog and its views, the
lake check, the journal of finished rows, shards and the batch lock."""
