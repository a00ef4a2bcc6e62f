"""The tests' JVM options: C1 only and SQL interpreted always; an archive named only when it exists
(naming a missing one would also turn off the JDK's own class sharing), and its logging off (a JVM
that cannot use it must not print into output that tests read)."""

import sys
from importlib.metadata import version
from pathlib import Path

from tests.jvm import archive_path, jvm_options, submit_options


def test_without_an_archive_the_jvms_name_none(tmp_path: Path):
    options = submit_options(tmp_path / "missing.jsa")
    assert "-XX:TieredStopAtLevel=1" in options.split()
    assert "SharedArchiveFile" not in options
    assert submit_options(None) == options


def test_an_archive_that_exists_is_mapped_with_its_logging_off(tmp_path: Path):
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"")
    options = submit_options(archive).split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert {"-Xlog:cds=off", "-Xlog:cds+dynamic=off"} <= set(options)


def test_every_test_driver_compiles_with_c1_only_and_evaluates_sql_interpreted(tmp_path: Path):
    for archive in (None, tmp_path / "missing.jsa"):
        options = submit_options(archive).split()
        assert "-XX:TieredStopAtLevel=1" in options
        assert {"-Dspark.sql.codegen.wholeStage=false", "-Dspark.sql.codegen.factoryMode=NO_CODEGEN"} <= set(
            options
        )


def test_a_daemons_or_executors_options_set_no_spark_property(tmp_path: Path):
    """Spark refuses to start an executor whose extraJavaOptions set a `spark.*` property."""
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"")
    for options in (jvm_options(archive), jvm_options(None)):
        assert "-Dspark." not in options
        assert "-XX:TieredStopAtLevel=1" in options.split()


def test_the_archive_belongs_to_the_virtualenv_and_its_pyspark():
    path = archive_path()
    assert path.parent == Path(sys.prefix)
    assert version("pyspark") in path.name
