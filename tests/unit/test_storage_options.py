"""Credentials handed to delta-rs (a profile's keys, which delta-rs cannot resolve itself) are resolved
again in long-running processes, so rotated or renewed keys are used without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3events.infra.aws import AwsOptions, FreshStorageOptions, resolve


def write_profile(path: Path, key: str) -> None:
    path.write_text(f"[ingest]\naws_access_key_id = {key}\naws_secret_access_key = secret-{key}\n")


@pytest.fixture
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    credentials = tmp_path / "credentials"
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "ingest")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    write_profile(credentials, "first")
    return credentials


def test_rotated_profile_keys_are_used_once_the_resolved_ones_are_old(profile: Path):
    fresh = FreshStorageOptions(AwsOptions(region="eu-west-1"), max_age_seconds=0)
    assert fresh()["AWS_ACCESS_KEY_ID"] == "first"
    write_profile(profile, "second")
    assert fresh()["AWS_ACCESS_KEY_ID"] == "second"
    assert fresh()["AWS_REGION"] == "eu-west-1"


def test_resolved_options_are_reused_while_young(profile: Path):
    fresh = FreshStorageOptions(AwsOptions(region="eu-west-1"), max_age_seconds=3600)
    assert fresh()["AWS_ACCESS_KEY_ID"] == "first"
    write_profile(profile, "second")
    assert fresh()["AWS_ACCESS_KEY_ID"] == "first"


def test_plain_mappings_still_work():
    assert resolve({"AWS_REGION": "x"}) == {"AWS_REGION": "x"}
