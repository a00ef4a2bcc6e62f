"""The interop suite's Spark: the shared test session, which carries delta-spark when this suite runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import DELTA_SPARK, DELTA_SPARK_CONF, DELTA_SPARK_PACKAGE


@pytest.fixture
def delta_spark(spark: Any) -> Any:
    """The session with delta-spark loaded; fails (never skips) when it could not be loaded."""
    if DELTA_SPARK["error"]:
        pytest.fail(
            f"delta-spark ({DELTA_SPARK_PACKAGE}) could not be loaded into the Spark session: "
            f"{DELTA_SPARK['error']}. It is fetched from Maven Central by spark.jars.packages into "
            f"{DELTA_SPARK_CONF['spark.jars.ivy']}: is Maven Central reachable? (Ivy's report is in the "
            "captured stderr of the first test that started Spark.)",
            pytrace=False,
        )
    if "DeltaSparkSessionExtension" not in spark.conf.get("spark.sql.extensions", ""):
        pytest.fail("the shared Spark session was started without delta-spark", pytrace=False)
    # Every test reads its own tables, but delta-spark caches a table's log per path: start afresh.
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return spark
