"""The configuration package: loading, interpolation, checking, templated keys, docs and sample files."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import javaproperties
import pytest

from s3events import cli
from s3events.config import Settings, keys, load_settings
from s3events.config.docs import REGENERATE, render_reference
from s3events.config.registry import Key, Registry, Removed
from s3events.config.value_types import BoolType, StrType
from s3events.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"

MINIMAL = """\
s3events.source.queue.url=http://127.0.0.1:5000/123456789012/q
s3events.metadata.table.path=s3://bucket/tables/metadata
"""

ONE_TARGET = (
    MINIMAL
    + """\
s3events.ingest.targets=events
s3events.ingest.target.events.path=s3://bucket/tables/events
s3events.ingest.target.events.format=json
"""
)


def props(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "test.properties"
    path.write_text(text, encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, *overrides: str, env: dict[str, str] | None = None) -> Settings:
    return load_settings(props(tmp_path, text), overrides, env={} if env is None else env)


def error_of(tmp_path: Path, text: str, *overrides: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_text(tmp_path, text, *overrides, env=env)
    return caught.value


# ---------------------------------------------------------------------------------------- file, overrides


def test_override_wins_over_file_and_the_last_override_wins(tmp_path: Path) -> None:
    settings = load_text(
        tmp_path,
        MINIMAL + "s3events.source.queue.long.poll.wait=5\ns3events.log.level=WARNING\n",
        "s3events.source.queue.long.poll.wait=7",
        "s3events.source.queue.long.poll.wait=9",
    )
    assert settings.get(keys.QUEUE_LONG_POLL_WAIT) == 9
    assert settings.get(keys.LOG_LEVEL) == "WARNING"  # untouched by overrides
    assert settings.get(keys.QUEUE_VISIBILITY_TIMEOUT) == 30  # default


def test_overrides_alone_without_a_file(tmp_path: Path) -> None:
    overrides = ["s3events.metadata.table.path=local/meta", "s3events.log.level=debug"]
    settings = load_settings(None, overrides, env={})
    assert settings.get(keys.METADATA_TABLE_PATH) == "local/meta"
    assert settings.get(keys.LOG_LEVEL) == "DEBUG"  # choices ignore case, value is the declared spelling
    assert settings.source is None


def test_override_value_may_contain_equals_signs(tmp_path: Path) -> None:
    override = "s3events.ingest.target.events.reader.options=sep=;,header=true"
    settings = load_text(tmp_path, ONE_TARGET, override)
    assert settings.get_for("events", keys.TARGET_READER_OPTIONS) == {"sep": ";", "header": "true"}


def test_override_without_equals_is_an_error(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL, "s3events.log.level")
    assert err.key == "--conf"
    assert "'s3events.log.level' is not key=value" in str(err)


def test_missing_properties_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as caught:
        load_settings(missing, env={})
    assert caught.value.key == "--props"
    assert str(missing) in str(caught.value)


def test_a_directory_is_not_a_properties_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_settings(tmp_path, env={})


def test_key_set_twice_in_one_file_is_an_error(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "s3events.log.level=INFO\ns3events.log.level=DEBUG\n")
    assert err.key == "s3events.log.level"
    assert "set more than once" in str(err)


def test_java_properties_syntax_is_honoured(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + "! comment\ns3events.backfill.sources = s3://aaa/x, \\\n    s3://bbb\ns3events.log.level:ERROR\n"
    )
    settings = load_text(tmp_path, text)
    assert settings.get(keys.BACKFILL_SOURCES) == ("s3://aaa/x", "s3://bbb")
    assert settings.get(keys.LOG_LEVEL) == "ERROR"


def test_empty_value_means_unset_and_the_default_applies(tmp_path: Path) -> None:
    text = MINIMAL + "s3events.source.queue.long.poll.wait=  \ns3events.aws.region=\n"
    settings = load_text(tmp_path, text)
    assert settings.get(keys.QUEUE_LONG_POLL_WAIT) == 20
    assert settings.get(keys.AWS_REGION) is None
    assert not settings.is_set(keys.AWS_REGION)
    assert settings.is_set(keys.QUEUE_URL)


def test_values_are_typed(tmp_path: Path) -> None:
    settings = load_text(
        tmp_path,
        MINIMAL + "s3events.source.queue.max.batch.seconds=2.5\ns3events.ingest.targets= a , ,b,\n",
    )
    assert settings.get(keys.QUEUE_MAX_BATCH_SECONDS) == 2.5
    assert settings.get(keys.QUEUE_LONG_POLL_WAIT) == 20
    assert isinstance(settings.get(keys.QUEUE_LONG_POLL_WAIT), int)
    assert settings.targets == ("a", "b")  # trimmed, empty items dropped


# --------------------------------------------------------------------------------------------- interpolation


def test_env_interpolation_with_and_without_default(tmp_path: Path) -> None:
    text = (
        "s3events.source.queue.url=${QUEUE}\n"
        "s3events.metadata.table.path=${DATA_DIR:-demo-data}/metadata\n"
        "s3events.aws.region=${REGION:-us-east-1}\n"
    )
    env = {"QUEUE": "https://sqs.eu-west-1.amazonaws.com/1/q", "REGION": ""}
    settings = load_text(tmp_path, text, env=env)
    assert settings.get(keys.QUEUE_URL) == "https://sqs.eu-west-1.amazonaws.com/1/q"
    assert settings.get(keys.METADATA_TABLE_PATH) == "demo-data/metadata"
    assert settings.get(keys.AWS_REGION) == "us-east-1"  # empty counts as unset for :-, as in the shell

    settings = load_text(tmp_path, text, env={"QUEUE": "http://h/1/q", "DATA_DIR": "/srv/data"})
    assert settings.get(keys.METADATA_TABLE_PATH) == "/srv/data/metadata"


def test_overrides_are_interpolated_too(tmp_path: Path) -> None:
    settings = load_text(tmp_path, MINIMAL, "s3events.log.level=${LEVEL}", env={"LEVEL": "ERROR"})
    assert settings.get(keys.LOG_LEVEL) == "ERROR"


def test_unset_env_variable_without_default_names_key_and_variable(tmp_path: Path) -> None:
    err = error_of(tmp_path, "s3events.source.queue.url=${S3EVENTS_TEST_UNSET_QUEUE}\n")
    assert err.key == "s3events.source.queue.url"
    assert "S3EVENTS_TEST_UNSET_QUEUE is not set" in str(err)


def test_double_dollar_escapes_interpolation(tmp_path: Path) -> None:
    settings = load_text(tmp_path, ONE_TARGET + "s3events.ingest.target.events.glob=$${literal}*.json\n")
    assert settings.get_for("events", keys.TARGET_GLOB) == "${literal}*.json"


@pytest.mark.parametrize("value", ["${", "${1BAD}", "${A B}", "x${Y"])
def test_malformed_reference_is_an_error(tmp_path: Path, value: str) -> None:
    err = error_of(tmp_path, f"s3events.spark.master={value}\n", env={"Y": "y"})
    assert err.key == "s3events.spark.master"


# ------------------------------------------------------------------------------------------ checking values


def test_unknown_key_suggests_the_closest_declared_name(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "s3events.source.queue.long.pol.wait=10\n")
    assert err.key == "s3events.source.queue.long.pol.wait"
    assert "unknown key" in str(err)
    assert "did you mean s3events.source.queue.long.poll.wait?" in str(err)


def test_unknown_per_target_suffix_suggests_the_filled_in_name(tmp_path: Path) -> None:
    err = error_of(tmp_path, ONE_TARGET + "s3events.ingest.target.events.formatt=csv\n")
    assert "did you mean s3events.ingest.target.events.format?" in str(err)


def test_keys_outside_the_prefix_are_unknown(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "source.queue.url=http://x/1/q\n")
    assert "unknown key" in str(err)
    assert "s3events." in str(err)
    assert "did you mean s3events.source.queue.url?" in str(err)


@pytest.fixture
def root_logging_restored() -> Iterator[None]:
    """cli.run configures the root logger on this test's captured stderr, which closes after it: put the
    root logger back so later tests do not log to a closed stream."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.parametrize("fmt", ["text", "parquet"])
@pytest.mark.usefixtures("root_logging_restored")
def test_a_removed_fast_path_switch_fails_at_start_up_naming_the_key_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    line = f"s3events.ingest.target.events.{fmt}.fast.path=false\n"
    err = error_of(tmp_path, ONE_TARGET + line)
    assert err.key == f"s3events.ingest.target.events.{fmt}.fast.path"
    assert "removed: text and Parquet have a single reader" in str(err)
    assert "did you mean" not in str(err)

    assert cli.run(["ingest", "--once", "--props", str(props(tmp_path, ONE_TARGET + line))]) == 2
    assert f"target.events.{fmt}.fast.path: removed: text and Parquet" in capsys.readouterr().err


def test_a_removed_key_is_matched_for_any_target_and_may_not_also_be_declared() -> None:
    gone = Removed("s3events.ingest.target.<name>.old.switch", "it did nothing")
    assert gone.matches("s3events.ingest.target.a-1.old.switch")
    assert not gone.matches("s3events.ingest.target.a.b.old.switch")
    assert not gone.matches("s3events.ingest.target.a.old.switch.more")
    key = Key(name="s3events.test.old", type=BoolType(), doc="Old.")
    with pytest.raises(ValueError, match="declared and removed"):
        Registry([key], [Removed("s3events.test.old", "it did nothing")])


def test_credential_keys_point_to_the_aws_chain(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "s3events.aws.secret.access.key=abc\n")
    assert "AWS credential chain" in str(err)


def test_out_of_range_int_names_key_value_and_range(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "s3events.source.queue.long.poll.wait=25\n")
    assert str(err) == "s3events.source.queue.long.poll.wait: 25 is out of range; allowed 0..20"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("s3events.source.queue.visibility.timeout=ten", "'ten' is not an integer; allowed 0..43200"),
        ("s3events.source.queue.max.batch.seconds=0.05", "0.05 is out of range; allowed 0.1..3600"),
        ("s3events.source.queue.max.batch.seconds=nan", "'nan' is not a finite number"),
        ("s3events.capture.commit.max.attempts=1.5", "'1.5' is not an integer"),
        (
            "s3events.aws.endpoint.url=ftp://host",
            "'ftp://host' is not a valid URL; allowed an http:// or https://",
        ),
        ("s3events.backfill.sources=s3://okay,gs://no", "'gs://no' is not an S3 URI"),
        ("s3events.ingest.targets=a,a", "'a' is listed twice"),
        ("s3events.ingest.targets=bad.name", "'bad.name' is not valid"),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(tmp_path: Path, line: str, expected: str) -> None:
    err = error_of(tmp_path, MINIMAL + line + "\n")
    assert err.key == line.partition("=")[0]
    assert expected in str(err)


def test_bad_bool_accepts_only_true_and_false() -> None:
    flag: Key[bool] = Key(name="s3events.test.flag", type=BoolType(), default=False, doc="A test flag.")
    assert flag.parse("TRUE") is True
    assert flag.parse(" false ") is False
    for bad in ("yes", "1", "on", "truee"):
        with pytest.raises(ConfigError) as caught:
            flag.parse(bad)
        assert str(caught.value) == f"s3events.test.flag: {bad!r} is not a boolean; allowed true, false"


def test_bad_choice_lists_the_allowed_values(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "s3events.source.poison.action=drop\n")
    assert err.key == "s3events.source.poison.action"
    assert "'drop'" in str(err)
    assert "allowed delete, redrive" in str(err)


@pytest.mark.parametrize(
    "path", ["s3a://bucket/meta", "gs://bucket/meta", "abfss://c@a.dfs/x", "file:///tmp/x"]
)
def test_bad_table_path_scheme_is_rejected(tmp_path: Path, path: str) -> None:
    err = error_of(tmp_path, f"s3events.metadata.table.path={path}\n")
    assert err.key == "s3events.metadata.table.path"
    assert "unsupported scheme" in str(err)
    assert "s3://bucket/prefix or a local path" in str(err)


def test_s3a_hint_says_to_write_s3(tmp_path: Path) -> None:
    err = error_of(tmp_path, "s3events.metadata.table.path=s3a://bucket/meta\n")
    assert "write s3:// instead of s3a://" in str(err)


def test_table_paths_need_a_prefix_and_a_valid_bucket(tmp_path: Path) -> None:
    assert "bucket root" in str(error_of(tmp_path, "s3events.metadata.table.path=s3://bucket/\n"))
    assert "valid S3 bucket" in str(error_of(tmp_path, "s3events.metadata.table.path=s3://Bad_Bucket/x\n"))


def test_table_path_trailing_slash_is_dropped(tmp_path: Path) -> None:
    settings = load_text(tmp_path, "s3events.metadata.table.path=S3://bucket/tables/meta/\n")
    assert settings.get(keys.METADATA_TABLE_PATH) == "s3://bucket/tables/meta"
    assert settings.get(keys.QUARANTINE_TABLE_PATH) == "s3://bucket/tables/meta_quarantine"


# ---------------------------------------------------------------------------------------- required keys


def test_missing_required_key_for_a_command_names_key_and_doc(tmp_path: Path) -> None:
    settings = load_text(tmp_path, "s3events.metadata.table.path=meta\n")
    settings.validate_for("status")  # status needs only the metadata table
    with pytest.raises(ConfigError) as caught:
        settings.validate_for("capture")
    assert caught.value.key == "s3events.source.queue.url"
    assert "missing required key s3events.source.queue.url" in str(caught.value)
    assert keys.QUEUE_URL.doc in str(caught.value)
    assert "`s3events capture`" in str(caught.value)


def test_require_returns_the_value_or_raises(tmp_path: Path) -> None:
    settings = load_text(tmp_path, MINIMAL)
    assert settings.require(keys.QUEUE_URL) == "http://127.0.0.1:5000/123456789012/q"
    with pytest.raises(ConfigError, match=r"missing required key s3events\.aws\.endpoint\.url"):
        settings.require(keys.AWS_ENDPOINT_URL)


def test_ingest_needs_targets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(tmp_path, MINIMAL).validate_for("ingest")
    assert caught.value.key == "s3events.ingest.targets"


def test_backfill_needs_sources(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(tmp_path, MINIMAL).validate_for("backfill")
    assert caught.value.key == "s3events.backfill.sources"
    load_text(tmp_path, MINIMAL + "s3events.backfill.sources=s3://bucket/in/\n").validate_for("backfill")


def test_periodic_backfill_in_capture_needs_sources(tmp_path: Path) -> None:
    settings = load_text(tmp_path, MINIMAL + "s3events.backfill.interval.seconds=600\n")
    with pytest.raises(ConfigError) as caught:
        settings.validate_for("capture")
    assert caught.value.key == "s3events.backfill.sources"
    assert "s3events.backfill.interval.seconds > 0" in str(caught.value)


def test_unknown_command_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown command"):
        load_text(tmp_path, MINIMAL).validate_for("capturee")


# ----------------------------------------------------------------------------------------- templated keys


def test_templated_target_keys_are_read_per_target(tmp_path: Path) -> None:
    text = ONE_TARGET.replace("targets=events", "targets=events,logs-2") + (
        "s3events.ingest.target.events.ignore.prefix= tmp/ , _staging/ ,\n"
        "s3events.ingest.target.events.max.files.per.batch=50\n"
        "s3events.ingest.target.logs-2.path=s3://bucket/tables/logs\n"
        "s3events.ingest.target.logs-2.format=TEXT\n"
        "s3events.ingest.target.logs-2.mode=merge\n"
        "s3events.ingest.target.logs-2.record.key=host, ts\n"
    )
    settings = load_text(tmp_path, text)
    settings.validate_for("ingest")
    assert settings.targets == ("events", "logs-2")
    assert settings.get_for("events", keys.TARGET_IGNORE_PREFIX) == ("tmp/", "_staging/")
    assert settings.get_for("events", keys.TARGET_MAX_FILES_PER_BATCH) == 50
    assert settings.get_for("logs-2", keys.TARGET_MAX_FILES_PER_BATCH) == 1000
    assert settings.get_for("logs-2", keys.TARGET_FORMAT) == "text"
    assert settings.get_for("logs-2", keys.TARGET_RECORD_KEY) == ("host", "ts")
    assert settings.get_for("events", keys.TARGET_KEY_PREFIX) == ""
    assert settings.get_for("events", keys.TARGET_READER_OPTIONS) == MappingProxyType({})
    with pytest.raises(TypeError, match="get_for"):
        settings.get(keys.TARGET_PATH)
    with pytest.raises(TypeError, match="get\\(key\\)"):
        settings.get_for("events", keys.QUEUE_URL)


def test_templated_key_for_an_undeclared_target_names_key_and_declared_targets(tmp_path: Path) -> None:
    err = error_of(tmp_path, ONE_TARGET + "s3events.ingest.target.evnts.format=csv\n")
    assert err.key == "s3events.ingest.target.evnts.format"
    assert "'evnts' is not declared in s3events.ingest.targets (declared: events)" in str(err)
    assert "did you mean events?" in str(err)


def test_templated_key_with_no_targets_declared(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "s3events.ingest.target.events.path=x\n")
    assert "(declared: none)" in str(err)


def test_get_for_an_undeclared_target_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'other' is not declared"):
        load_text(tmp_path, ONE_TARGET).get_for("other", keys.TARGET_PATH)


def test_missing_per_target_required_key_for_ingest(tmp_path: Path) -> None:
    settings = load_text(tmp_path, ONE_TARGET.replace("s3events.ingest.target.events.format=json\n", ""))
    with pytest.raises(ConfigError) as caught:
        settings.validate_for("ingest")
    assert caught.value.key == "s3events.ingest.target.events.format"
    assert "missing required key" in str(caught.value)
    settings.validate_for("capture")  # capture does not care about targets


def test_merge_mode_without_record_key_is_an_error_for_ingest(tmp_path: Path) -> None:
    settings = load_text(tmp_path, ONE_TARGET + "s3events.ingest.target.events.mode=merge\n")
    with pytest.raises(ConfigError) as caught:
        settings.validate_for("ingest")
    assert caught.value.key == "s3events.ingest.target.events.record.key"
    assert "required when s3events.ingest.target.events.mode=merge" in str(caught.value)


# ---------------------------------------------------------------------------------------- derived defaults


def test_derived_defaults_for_quarantine_and_error_tables(tmp_path: Path) -> None:
    settings = load_text(tmp_path, ONE_TARGET)
    assert settings.get(keys.QUARANTINE_TABLE_PATH) == "s3://bucket/tables/metadata_quarantine"
    assert settings.get_for("events", keys.TARGET_ERROR_TABLE_PATH) == "s3://bucket/tables/events_errors"
    assert not settings.is_set(keys.QUARANTINE_TABLE_PATH)


def test_derived_defaults_follow_overrides_and_yield_to_explicit_values(tmp_path: Path) -> None:
    settings = load_text(
        tmp_path,
        ONE_TARGET + "s3events.ingest.target.events.error.table.path=s3://bucket/errs/events\n",
        "s3events.metadata.table.path=local/meta",
    )
    assert settings.get(keys.QUARANTINE_TABLE_PATH) == "local/meta_quarantine"
    assert settings.get_for("events", keys.TARGET_ERROR_TABLE_PATH) == "s3://bucket/errs/events"


def test_derived_default_without_its_base_is_unset() -> None:
    assert load_settings(None, env={}).get(keys.QUARANTINE_TABLE_PATH) is None


@pytest.mark.parametrize(
    "extra",
    [
        "s3events.ingest.target.events.path=s3://bucket/tables/metadata\n",
        "s3events.metadata.quarantine.table.path=s3://bucket/tables/events\n",
        "s3events.ingest.target.events.path=s3://bucket/tables/metadata/events\n",
    ],
)
def test_two_tables_may_not_share_or_nest_paths(tmp_path: Path, extra: str) -> None:
    text = ONE_TARGET.replace("s3events.ingest.target.events.path=s3://bucket/tables/events\n", "")
    if "target.events.path" not in extra:
        text += "s3events.ingest.target.events.path=s3://bucket/tables/events\n"
    settings = load_text(tmp_path, text + extra)
    with pytest.raises(ConfigError, match=r"its own path|nested"):
        settings.validate_for("ingest")


# ------------------------------------------------------------------------------------ settings object


def test_settings_are_immutable(tmp_path: Path) -> None:
    settings = load_text(tmp_path, MINIMAL)
    with pytest.raises(AttributeError):
        settings._values = {}
    with pytest.raises(AttributeError):
        settings.anything = 1


def test_redacted_dict_hides_secret_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token: Key[str | None] = Key(
        name="s3events.test.token", type=StrType(), doc="A test secret.", secret=True
    )
    monkeypatch.setattr(keys, "REGISTRY", Registry([*keys.REGISTRY, token]))
    settings = load_text(tmp_path, ONE_TARGET + "s3events.test.token=hunter2\n")
    redacted = settings.as_redacted_dict()
    assert redacted["s3events.test.token"] == "***"
    assert redacted["s3events.source.queue.long.poll.wait"] == "20"
    assert redacted["s3events.ingest.target.events.format"] == "json"
    assert redacted["s3events.aws.region"] is None
    assert "hunter2" not in repr(settings)


def test_secret_values_are_not_echoed_in_errors() -> None:
    number: Key[int | None] = Key(
        name="s3events.test.pin", type=keys.QUEUE_LONG_POLL_WAIT.type, doc="Pin.", secret=True
    )
    with pytest.raises(ConfigError) as caught:
        number.parse("s3cr3t")
    assert "s3cr3t" not in str(caught.value)


def test_registry_declarations_are_consistent() -> None:
    names = [key.name for key in keys.REGISTRY]
    assert len(names) == len(set(names))
    exported = {name for name in keys.__all__ if isinstance(getattr(keys, name), Key)}
    assert {key.name for key in keys.REGISTRY} == {getattr(keys, name).name for name in exported}
    for key in keys.REGISTRY:
        assert key.name.startswith("s3events.")
        assert key.doc.endswith(".") and "\n" not in key.doc
        assert key.required_for <= set(keys.COMMANDS)


# ------------------------------------------------------------------------------- shipped files and docs


@pytest.mark.parametrize("path", sorted(CONF.glob("*.properties")), ids=lambda path: path.name)
def test_shipped_properties_files_load_and_validate(path: Path) -> None:
    settings = load_settings(path, env={})
    for command in ("capture", "ingest", "status"):
        settings.validate_for(command)
    settings = load_settings(path, ["s3events.backfill.sources=s3://bucket/in"], env={})
    settings.validate_for("backfill")


def test_reference_properties_file_documents_every_key_with_its_default() -> None:
    path = CONF / "s3events.properties"
    with path.open(encoding="utf-8") as fp:
        written = javaproperties.load(fp)
    settings = load_settings(path, env={})
    for key in keys.REGISTRY:
        name = key.concrete("events") if key.templated else key.name
        assert name in written, f"{name} is not documented in {path}"
        if not key.default_from and key.default is not None and not key.required_for:
            target = "events" if key.templated else None
            value = settings.get_for("events", key) if target else settings.get(key)
            assert value == key.default, f"{name} in {path} is not its default {key.default!r}"
    text = path.read_text(encoding="utf-8")
    for key in keys.REGISTRY:
        assert key.doc.split(";")[0].split("(")[0].strip()[:40] in text.replace("\n# ", " "), key.name


def test_configuration_reference_is_in_sync_with_the_declarations() -> None:
    path = ROOT / "docs" / "configuration.md"
    assert path.read_text(encoding="utf-8") == render_reference(), (
        f"{path} is out of date with s3events/config/keys.py; regenerate it with: {REGENERATE}"
    )


def test_reference_lists_every_key() -> None:
    reference = render_reference()
    for key in keys.REGISTRY:
        assert f"`{key.name}`" in reference
