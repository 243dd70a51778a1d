"""``warren pipeline``: Spark jobs between Warren and files (archive, replay, stats)."""
