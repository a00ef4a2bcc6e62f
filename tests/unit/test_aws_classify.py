"""botocore errors become fatal or transient in one line (`aws.classify`)."""

from __future__ import annotations

from typing import Any

import botocore.credentials
import botocore.exceptions
import pytest

from s3events.errors import CredentialsRejected, FatalError, TransientError
from s3events.infra import aws

# What botocore makes of an XML error answer to a JSON-protocol call (SQS): no code, the body as message.
_UNPARSED = (
    '<?xml version="1.0" encoding="utf-8"?>\n<ErrorResponse><Errors><Error><Code>InvalidClientTokenId</Code>'
    "<Message>The security token included in the request is invalid.</Message><Type>Sender</Type></Error>"
    "</Errors></ErrorResponse>"
)


def _client_error(code: str, message: str, status: int) -> botocore.exceptions.ClientError:
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return botocore.exceptions.ClientError(response, "ReceiveMessage")  # type: ignore[arg-type]


def test_an_error_body_botocore_could_not_parse_is_read_for_its_code_and_said_in_one_line():
    error = aws.classify(_client_error("403", _UNPARSED, 403), action="receiving from q")
    assert isinstance(error, FatalError)
    assert str(error) == (
        "receiving from q: the access key is not valid (InvalidClientTokenId: The security token included "
        "in the request is invalid.)"
    )


def test_a_multi_line_message_is_said_in_one_line():
    error = aws.classify(_client_error("ServiceUnavailable", "down\nfor a\nmoment", 503), action="x")
    assert isinstance(error, TransientError) and "\n" not in str(error)


@pytest.mark.parametrize(
    "code",
    [
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidToken",
    ],
)
def test_rejected_credentials_are_a_fatal_error_of_their_own_kind(code):
    error = aws.classify(_client_error(code, "no", 403), action="receiving from q")
    assert isinstance(error, CredentialsRejected) and isinstance(error, FatalError)
    assert code in str(error)


def test_access_denied_is_fatal_but_not_a_credentials_rejection():
    error = aws.classify(_client_error("AccessDenied", "no", 403), action="x")
    assert isinstance(error, FatalError) and not isinstance(error, CredentialsRejected)


def test_a_rejection_names_the_credentials_that_signed_the_request(monkeypatch):
    chain = aws.CredentialChain(lambda: _Static("AKIA1"))
    monkeypatch.setattr(aws, "credential_chain", lambda: chain)
    signer_view = aws.session(aws.AwsOptions(region="us-east-1")).get_credentials()
    signer_view.get_frozen_credentials()  # what botocore does when it signs a request
    chain._resolve = lambda: _Static("AKIA2")
    assert chain.renew() is True  # meanwhile, another thread renewed them

    error = aws.classify(_client_error("InvalidAccessKeyId", "no", 403), action="x")

    assert isinstance(error, CredentialsRejected) and error.generation == 0


class _Static:
    method = "shared-credentials-file"

    def __init__(self, key: str) -> None:
        self.key = key

    def get_frozen_credentials(self) -> Any:
        return botocore.credentials.ReadOnlyCredentials(self.key, "secret", None)
