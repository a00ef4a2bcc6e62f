"""Credentials handed to delta-rs (a profile's keys, which delta-rs cannot resolve itself) and the ones boto3
clients sign with come from one credential chain per process, resolved again every 15 minutes and at once
after a rejection, so rotated or renewed keys are used without a restart."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import botocore.awsrequest
import botocore.credentials
import botocore.exceptions
import pytest

from s3events.errors import CredentialsRejected
from s3events.infra import aws, aws_credentials
from s3events.infra.aws import AwsOptions, CredentialChain, FreshStorageOptions, resolve


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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_rotated_profile_keys_are_used_once_the_resolved_ones_are_old(profile: Path):
    clock = Clock()
    fresh = FreshStorageOptions(AwsOptions(region="eu-west-1"), chain=CredentialChain(clock=clock))
    assert fresh()["AWS_ACCESS_KEY_ID"] == "first"
    write_profile(profile, "second")
    clock.now += 899
    assert fresh()["AWS_ACCESS_KEY_ID"] == "first"  # still young
    clock.now += 1
    assert fresh()["AWS_ACCESS_KEY_ID"] == "second"
    assert fresh()["AWS_SECRET_ACCESS_KEY"] == "secret-second"
    assert fresh()["AWS_REGION"] == "eu-west-1"


def test_renewing_uses_rotated_keys_at_once_and_says_whether_they_changed(profile: Path):
    chain = CredentialChain(clock=Clock())
    fresh = FreshStorageOptions(AwsOptions(region="eu-west-1"), chain=chain)
    assert fresh()["AWS_ACCESS_KEY_ID"] == "first"
    assert chain.renew() is False  # the file still holds the same key
    write_profile(profile, "second")
    assert chain.renew() is True
    assert fresh()["AWS_ACCESS_KEY_ID"] == "second"
    assert chain.generation == 1


def test_credentials_another_thread_renewed_since_the_rejected_request_are_retried(profile: Path):
    chain = CredentialChain(clock=Clock())
    _, signed_with = chain.current_with_generation()
    write_profile(profile, "second")
    assert chain.renew(signed_with) is True  # the first thread whose request was refused
    assert chain.renew(signed_with) is True  # a second one, refused with the same key: retry, the key is new
    assert chain.renew(chain.generation) is False  # refused with the new key: it stands
    assert chain.generation == 1


def test_a_chain_that_yields_no_credentials_any_more_is_not_a_renewal(profile: Path):
    chain = CredentialChain(clock=Clock())
    assert chain.current() is not None
    profile.write_text("")  # the profile is gone
    assert chain.renew() is False
    profile.unlink()
    assert chain.renew() is False


def test_renewal_after_a_rejection_logs_one_line_without_key_material(
    profile: Path, caplog: pytest.LogCaptureFixture
):
    chain = CredentialChain(clock=Clock())
    chain.current()
    caplog.set_level(logging.INFO)
    rejection = CredentialsRejected(
        "receiving from q: the access key is not valid (InvalidClientTokenId: invalid token)"
    )

    assert aws.renew_credentials(rejection, chain=chain) is False
    ours = [r for r in caplog.records if r.name == aws_credentials.__name__]
    assert ours == []  # the same credentials: the caller's fatal error says it
    write_profile(profile, "second")
    assert aws.renew_credentials(rejection, chain=chain) is True

    [record] = [r for r in caplog.records if r.name == aws_credentials.__name__]
    line = record.getMessage()
    assert "credentials refreshed after a rejection" in line and "shared-credentials-file" in line
    assert "InvalidClientTokenId" in line and "\n" not in line
    assert "first" not in line and "second" not in line  # neither key id nor secret


def test_boto3_clients_sign_with_the_renewed_credentials_without_being_created_again(
    profile: Path, monkeypatch: pytest.MonkeyPatch
):
    chain = CredentialChain(clock=Clock())
    monkeypatch.setattr(aws, "credential_chain", lambda: chain)
    client = aws.session(AwsOptions(region="us-east-1")).client("sqs", endpoint_url="http://127.0.0.1:9")
    signed_with: list[str] = []

    def answer(request: Any, **_: Any) -> botocore.awsrequest.AWSResponse:
        signed_with.append(request.headers["Authorization"].decode().split("Credential=")[1].split("/")[0])
        return botocore.awsrequest.AWSResponse(request.url, 200, {}, _Raw(b'{"QueueUrls": []}'))

    client.meta.events.register("before-send", answer)
    client.list_queues()
    write_profile(profile, "second")
    client.list_queues()  # the chain was not renewed: the client keeps the key it had
    assert chain.renew() is True
    client.list_queues()
    assert signed_with == ["first", "first", "second"]


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def test_plain_mappings_still_work():
    assert resolve({"AWS_REGION": "x"}) == {"AWS_REGION": "x"}


def test_held_credentials_that_cannot_refresh_any_more_are_replaced_by_fresh_ones():
    class Expired:
        method = "sso"

        def get_frozen_credentials(self) -> Any:
            raise botocore.exceptions.TokenRetrievalError(provider="sso", error_msg="token expired")

    class Fresh:
        method = "sso"

        def get_frozen_credentials(self) -> Any:
            return botocore.credentials.ReadOnlyCredentials("key", "secret", "token")

    answers: list[Any] = [Expired(), Fresh()]
    chain = CredentialChain(lambda: answers.pop(0), clock=Clock())
    chain.current()
    assert chain.renew() is True and isinstance(chain.current(), Fresh)
