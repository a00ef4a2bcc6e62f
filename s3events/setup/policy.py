"""The queue policy: our one statement (S3 may send from exactly the configured buckets of one account),
merged into whatever else the policy holds, and a static check that a policy lets a bucket send.

The static check matters: S3 reports nothing when a policy blocks its notifications (they just never
arrive), and local endpoints such as moto do not evaluate queue policies at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from s3events.setup.model import POLICY_SID

_S3_SERVICE = "s3.amazonaws.com"
_VERSION = "2012-10-17"


def our_statement(queue_arn: str, bucket_arns: Iterable[str], account: str) -> dict[str, Any]:
    return {
        "Sid": POLICY_SID,
        "Effect": "Allow",
        "Principal": {"Service": _S3_SERVICE},
        "Action": "sqs:SendMessage",
        "Resource": queue_arn,
        "Condition": {
            "ArnLike": {"aws:SourceArn": sorted(bucket_arns)},
            "StringEquals": {"aws:SourceAccount": account},
        },
    }


def parse(text: str | None) -> dict[str, Any] | None:
    """A policy document, or None when there is none (SQS answers an unset policy with no attribute)."""
    if not text:
        return None
    document = json.loads(text)
    return document if isinstance(document, dict) else None


def _statements(document: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not document:
        return []
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def ours(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return next((s for s in _statements(document) if s.get("Sid") == POLICY_SID), None)


def with_ours(document: Mapping[str, Any] | None, statement: Mapping[str, Any]) -> dict[str, Any]:
    """The policy with our statement in place of an older one of ours (in its place, so a policy that
    holds it already compares equal); every other statement kept."""
    statements = _statements(document)
    if any(s.get("Sid") == POLICY_SID for s in statements):
        statements = [dict(statement) if s.get("Sid") == POLICY_SID else s for s in statements]
    else:
        statements = [*statements, dict(statement)]
    merged = dict(document or {"Version": _VERSION})
    merged["Statement"] = statements
    return merged


def without_ours(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The policy without our statement; None when nothing else is left."""
    others = [s for s in _statements(document) if s.get("Sid") != POLICY_SID]
    if not others:
        return None
    return {**document, "Statement": others} if document else None


def _canonical(value: Any) -> Any:
    """IAM treats ["x"] as "x" and lists of strings as sets; AWS may hand a policy back either way."""
    if isinstance(value, Mapping):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_canonical(v) for v in value]
        if len(items) == 1:
            return items[0]
        return sorted(items) if all(isinstance(i, str) for i in items) else items
    return value


def same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Equal as IAM reads them, so a policy AWS reformatted does not look changed on every run."""
    return json.dumps(_canonical(a), sort_keys=True) == json.dumps(_canonical(b), sort_keys=True)


# ------------------------------------------------------------------------------------------ static check


def _as_list(value: object) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _principal_is_s3(principal: object) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, Mapping):
        if "*" in _as_list(principal.get("AWS")):
            return True
        return _S3_SERVICE in _as_list(principal.get("Service"))
    return False


def _matches_any(patterns: object, value: str, *, ignore_case: bool = False) -> bool:
    for pattern in _as_list(patterns):
        if not isinstance(pattern, str):
            continue
        if ignore_case:
            if fnmatchcase(value.lower(), pattern.lower()):
                return True
        elif fnmatchcase(value, pattern):
            return True
    return False


_OPERATORS = {
    "ArnLike": (True, False),  # (wildcards, ignore case)
    "ArnEquals": (True, False),  # IAM lets ArnEquals take wildcards too
    "StringLike": (True, False),
    "StringEquals": (False, False),
    "StringEqualsIgnoreCase": (False, True),
}


def _conditions_hold(conditions: object, context: Mapping[str, str]) -> bool:
    """Whether the conditions hold for S3 sending from one bucket. Operators and keys this check does
    not know are taken to hold: it reports only what it can prove."""
    if not isinstance(conditions, Mapping):
        return True
    for operator, clauses in conditions.items():
        base = operator.removesuffix("IfExists")
        if base not in _OPERATORS or not isinstance(clauses, Mapping):
            continue
        wildcards, ignore_case = _OPERATORS[base]
        for key, expected in clauses.items():
            value = context.get(key) if isinstance(key, str) else None
            if value is None:
                continue
            if wildcards:
                if not _matches_any(expected, value, ignore_case=ignore_case):
                    return False
            elif not any(
                isinstance(e, str) and (e.lower() == value.lower() if ignore_case else e == value)
                for e in _as_list(expected)
            ):
                return False
    return True


def _applies(statement: Mapping[str, Any], queue_arn: str, context: Mapping[str, str]) -> bool:
    return (
        _principal_is_s3(statement.get("Principal"))
        and _matches_any(statement.get("Action"), "sqs:SendMessage", ignore_case=True)
        and _matches_any(statement.get("Resource", "*"), queue_arn)
        and _conditions_hold(statement.get("Condition"), context)
    )


def send_problem(
    document: Mapping[str, Any] | None, *, queue_arn: str, bucket_arn: str, account: str
) -> str | None:
    """Why S3 could not send this bucket's events to the queue under this policy, or None when it can."""
    if not document:
        return "the queue has no policy, so S3 may not send to it"
    context = {"aws:SourceArn": bucket_arn, "aws:SourceAccount": account}
    for statement in _statements(document):
        if statement.get("Effect") == "Deny" and _applies(statement, queue_arn, context):
            return f"statement {statement.get('Sid', '(no Sid)')!r} denies S3 sending from {bucket_arn}"
    if any(s.get("Effect") == "Allow" and _applies(s, queue_arn, context) for s in _statements(document)):
        return None
    return (
        f"no statement allows s3.amazonaws.com to sqs:SendMessage from {bucket_arn} "
        f"(aws:SourceAccount {account})"
    )
