"""What the Spark source's read tests share: Python data sources' filter push-down switched on for
a test (Spark 4's ``spark.sql.python.filterPushdown.enabled``, off by default)."""

import pytest

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture
def pushdown(spark):
    before = spark.conf.get(PUSHDOWN)
    spark.conf.set(PUSHDOWN, "true")
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN, before)
