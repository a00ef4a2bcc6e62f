"""deploy/aws/s3events.yaml: valid CloudFormation, and IAM policies that match what the code really calls.

The boto3 operations are found in the source with `ast` (an attribute named like an operation of a
service the code makes clients for, or `get_paginator("<operation>")`), as are pyarrow S3FileSystem
calls; each is mapped to its IAM actions (OPERATION_ACTIONS), each module to the processes that run it
(PROCESSES) and to the resource it calls (the queue, the landing bucket or the lake). The Delta storage
that delta-rs reaches through object_store is declared per process (DELTA_ACCESS). Each process's
policies in the template must allow every action its modules need, and grant nothing else (EXTRA_GRANTS
lists the deliberate exceptions). A new call in the code fails here until the mapping and the template
say what it needs.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
import cfnlint.api
import pytest
from botocore import xform_name

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "aws" / "s3events.yaml"
PACKAGE = ROOT / "s3events"

ACCOUNT = "123456789012"
REGION = "eu-west-1"
STACK = "s3ev"
LANDING = "acme-landing"
LAKE = "acme-lake"
LAKE_PREFIX = "s3events"
PARAMETERS = {
    "LandingBucketName": LANDING,
    "NotificationPrefix": "events/",
    "LakeBucketName": LAKE,
    "LakePrefix": LAKE_PREFIX,
    "CatalogDatabaseName": "lake",
    # Commit notifications: two topics (a list), a FIFO queue, a bus
    "NotifyTopicArns": f"arn:aws:sns:{REGION}:{ACCOUNT}:lake-commits,arn:aws:sns:{REGION}:{ACCOUNT}:audit",
    "NotifyQueueArns": f"arn:aws:sqs:{REGION}:{ACCOUNT}:lake-commits.fifo",
    "NotifyEventBusArns": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/lake",
}
# What ingest announces commits to (ingest/notify/publish.py), by the service of the call.
NOTIFY_MODULE = "s3events/ingest/notify/publish.py"
NOTIFY_PARAMETERS = {"sns": "NotifyTopicArns", "sqs": "NotifyQueueArns", "events": "NotifyEventBusArns"}
NOTIFY_RESOURCES = {
    "notify-sns": f"arn:aws:sns:{REGION}:{ACCOUNT}:audit",
    "notify-sqs": PARAMETERS["NotifyQueueArns"],
    "notify-events": PARAMETERS["NotifyEventBusArns"],
}
QUEUE_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
LANDING_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/66666666-7777-8888-9999-000000000000"

# ------------------------------------------------------------------------------------------ the mapping

# boto3 operation (or pyarrow FileSystem method) -> IAM actions. Bucket-level actions (s3:List*,
# s3:GetBucket*) apply to the bucket ARN, the others to object ARNs.
OPERATION_ACTIONS: dict[str, tuple[str, ...]] = {
    # SQS (capture/queue.py, preflight.py): batch calls are authorised as their single-message actions
    "get_queue_attributes": ("sqs:GetQueueAttributes",),
    "receive_message": ("sqs:ReceiveMessage",),
    "delete_message_batch": ("sqs:DeleteMessage",),
    "change_message_visibility_batch": ("sqs:ChangeMessageVisibility",),
    # S3 control plane and objects through boto3
    "head_bucket": ("s3:ListBucket",),
    "list_objects_v2": ("s3:ListBucket",),
    "list_object_versions": ("s3:ListBucketVersions",),
    "get_bucket_versioning": ("s3:GetBucketVersioning",),
    "get_object": ("s3:GetObject",),  # + s3:GetObjectVersion where the module passes VersionId
    "head_object": ("s3:GetObject",),
    "put_object": ("s3:PutObject",),
    "delete_object": ("s3:DeleteObject",),
    "delete_objects": ("s3:DeleteObject",),  # a batch DELETE of up to 1,000 keys
    # pyarrow.fs.S3FileSystem (executors write Parquet files into the tables; infra/parquet_files.py)
    "open_output_stream": ("s3:PutObject", "s3:AbortMultipartUpload"),  # PUT or a multipart upload
    "delete_file": ("s3:GetObject", "s3:DeleteObject"),  # arrow HEADs the key before the DELETE
    "create_dir": ("s3:PutObject",),  # on S3 arrow would PUT a directory marker
    "open_input_file": ("s3:GetObject",),  # the driver reads what merge tasks staged
    "open_input_stream": ("s3:GetObject",),  # a fail target's refusal note (ingest/refusal.py)
    "get_file_info": ("s3:ListBucket",),  # a FileSelector LISTs the staging prefix
    # Glue (catalog/glue.py): target tables in s3events.catalog.database; setup creates the database
    "get_table": ("glue:GetTable",),
    "create_table": ("glue:CreateTable",),
    "update_table": ("glue:UpdateTable",),
    # Commit notifications (ingest/notify/publish.py)
    "publish": ("sns:Publish",),
    "send_message": ("sqs:SendMessage",),
    "put_events": ("events:PutEvents",),
    "create_database": ("glue:CreateDatabase",),
}
VERSIONED_READS = {"get_object": "s3:GetObjectVersion"}

# pyarrow FileSystem methods that touch storage (only looked for in modules that import pyarrow.fs).
PYARROW_FS_METHODS = {
    "open_output_stream", "open_append_stream", "open_input_file", "open_input_stream", "delete_file",
    "delete_dir", "delete_dir_contents", "create_dir", "get_file_info", "copy_file", "move",
}  # fmt: skip

# Which resource a module's S3 calls are about (SQS calls are always about the event queue).
S3_TARGET_OF_MODULE = {
    "s3events/backfill/s3_lister.py": "landing",
    "s3events/ingest/files/objects.py": "landing",
    "s3events/ingest/feed.py": "lake",  # has_version: a HEAD of the metadata table's next log entry
    "s3events/preflight.py": "lake",  # the start-up checks of the table locations
    "s3events/infra/parquet_files.py": "lake",
    "s3events/infra/delta_log.py": "lake",  # maintenance reads the log's statistics as written
    "s3events/ingest/files/transform.py": "lake",  # transform.sql.file, schema.file (read_user_file)
    "s3events/ingest/rebuild.py": "lake",  # ingest --rebuild deletes a target's tables
    "s3events/ingest/files/scratch.py": "lake",  # a killed run's scratch rows under a target
    "s3events/ingest/refusal.py": "lake",  # a fail target's refusal note beside its table
}

ALL = None  # every operation the module calls


@dataclass(frozen=True)
class Process:
    policies: tuple[str, ...]  # managed policies in the template (conditional ones included when deployed)
    modules: Mapping[str, frozenset[str] | None]  # path glob -> the operations of it the process calls
    delta: str  # "read" | "write": the Delta tables under the lake prefix, through delta-rs / object_store


PREFLIGHT_TABLES = frozenset({"head_bucket", "list_objects_v2", "put_object", "delete_object"})
PROCESSES: dict[str, Process] = {
    # capture also runs the periodic backfill pass and maintains the metadata and quarantine tables
    "capture": Process(
        ("CapturePolicy", "CaptureQueueKeyPolicy"),
        {
            "s3events/capture/*": ALL,
            "s3events/backfill/*": ALL,
            "s3events/metadata/*": ALL,
            "s3events/maintenance/*": ALL,
            "s3events/preflight.py": ALL,  # the only command that checks the queue at start-up
            "s3events/infra/delta*.py": ALL,
            "s3events/infra/table_info.py": ALL,
        },
        "write",
    ),
    "ingest": Process(
        ("IngestPolicy", "IngestLandingKeyPolicy"),
        {
            "s3events/ingest/*": ALL,
            "s3events/maintenance/*": ALL,
            "s3events/preflight.py": PREFLIGHT_TABLES,
            "s3events/infra/*": ALL,
            "s3events/catalog/*": frozenset({"get_table", "create_table", "update_table"}),
        },
        "write",
    ),
    "backfill": Process(
        ("BackfillPolicy",),
        {
            "s3events/backfill/*": ALL,
            "s3events/metadata/*": ALL,
            "s3events/preflight.py": PREFLIGHT_TABLES,
            "s3events/infra/delta*.py": ALL,
        },
        "write",
    ),
    "maintain": Process(
        ("MaintainPolicy",),
        {
            "s3events/maintenance/*": ALL,
            "s3events/preflight.py": PREFLIGHT_TABLES,
            "s3events/infra/delta*.py": ALL,
            "s3events/infra/table_info.py": ALL,
        },
        "write",
    ),
    "status": Process(
        ("StatusPolicy",),
        {
            "s3events/status/*": ALL,
            "s3events/catalog/*": frozenset({"get_table"}),  # the entries compared with the tables
            "s3events/capture/queue.py": frozenset({"get_queue_attributes"}),  # SqsQueue.depth
            "s3events/preflight.py": frozenset({"head_bucket", "list_objects_v2"}),  # reads only
            "s3events/infra/delta.py": ALL,
            "s3events/infra/table_info.py": ALL,
            "s3events/ingest/refusal.py": frozenset({"open_input_stream"}),  # why a fail target stands
        },
        "read",
    ),
}
# Modules whose AWS calls no deployed process makes with these roles.
NOT_A_PROCESS = {
    "s3events/dev/*": "the demo and the local endpoint: moto, never a real account",
    "s3events/setup/*": "`s3events setup` creates the queue and notification: an administrator's "
    "credentials, the same job as deploying this template",
}

# Calls `s3events setup` makes through a process's module (an administrator's credentials, as above).
SETUP_CALLS = {"s3events/catalog/glue.py": frozenset({"create_database"})}
# Services whose operation names are common words (get_table, get_session): looked for only in the
# modules that hold their client (the Hive metastore's Thrift calls are named like Glue's).
CLIENT_MODULES = {"glue": frozenset({"s3events/catalog/glue.py"})}

DELTA_ACTIONS = {
    # object_store: GET/HEAD, LIST with a prefix (and start-after), PUT If-None-Match for commits, PUT
    # and multipart uploads for data files and checkpoints, DELETE for log cleanup and vacuum.
    "read": ("s3:GetObject", "s3:ListBucket"),
    "write": ("s3:GetObject", "s3:ListBucket", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"),
}
# deltalake calls that write; a "read" process's own modules must not make them.
DELTA_WRITE_CALLS = {
    "merge", "vacuum", "cleanup_metadata", "compact", "create_checkpoint", "write_deltalake",
    "create_write_transaction", "commit_files",
}  # fmt: skip

# Grants no call in the code explains, each with its reason.
EXTRA_GRANTS = {
    ("ingest", "s3:ListBucket", "landing"): "without it S3 answers 403 instead of 404 for an object "
    "deleted before ingest, and the error row says access denied (ingest/files/objects.py)",
}

# ------------------------------------------------------------------------------------ template helpers


@cache
def template_text() -> str:
    return TEMPLATE.read_text(encoding="utf-8")


@cache
def template() -> dict[str, Any]:
    decoded, matches = cfnlint.api.decode_str(template_text())
    assert not matches, matches
    return dict(decoded)


_NO_VALUE = object()


class Rendered:
    """The template with parameters and conditions resolved, as CloudFormation would deploy it (only the
    intrinsic functions the template uses; AWS::NoValue drops list items and keys)."""

    def __init__(self, **overrides: str) -> None:
        self.t = template()
        params = {name: str(spec.get("Default", "")) for name, spec in self.t["Parameters"].items()}
        params.update(PARAMETERS)
        params.update(overrides)
        self.params = params
        self.conditions = {name: self.resolve(body) for name, body in self.t.get("Conditions", {}).items()}

    def resources(self) -> dict[str, dict[str, Any]]:
        return {
            name: self.resolve(body)
            for name, body in self.t["Resources"].items()
            if "Condition" not in body or self.conditions[body["Condition"]]
        }

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Partition": "aws",
            "AWS::AccountId": ACCOUNT,
            "AWS::Region": REGION,
            "AWS::StackName": STACK,
            "AWS::NoValue": _NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.params:
            return self.params[name]
        kind = self.t["Resources"][name]["Type"]
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self.queue_name(name)}"
        if kind == "AWS::IAM::ManagedPolicy":
            return f"arn:aws:iam::{ACCOUNT}:policy/{STACK}-{name}"
        return f"{STACK}-{name}"

    def queue_name(self, name: str) -> str:
        return str(self.resolve(self.t["Resources"][name]["Properties"]["QueueName"]))

    def get_att(self, name: str, attribute: str) -> str:
        kind = self.t["Resources"][name]["Type"]
        assert attribute == "Arn", (name, attribute)
        if kind == "AWS::SQS::Queue":
            return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{self.queue_name(name)}"
        if kind == "AWS::IAM::Role":
            return f"arn:aws:iam::{ACCOUNT}:role/{STACK}-{name}"
        raise AssertionError(f"GetAtt of {kind}")

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            items = [self.resolve(item) for item in node]
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(node, Mapping):
            return node
        if len(node) == 1:
            ((fn, arg),) = node.items()
            if fn == "Ref":
                return self.ref(arg)
            if fn == "Fn::GetAtt":
                return self.get_att(*arg)
            if fn == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if fn == "Fn::Sub":
                return re.sub(r"\$\{([^}]+)\}", lambda m: self._sub(m.group(1)), arg)
            if fn == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.conditions[name] else no)
            if fn == "Fn::Equals":
                a, b = (self.resolve(x) for x in arg)
                return str(a) == str(b)
            if fn == "Fn::Not":
                return not self.resolve(arg[0])
            if fn == "Condition":
                return self.conditions[arg]
            assert not fn.startswith("Fn::"), f"the test does not resolve {fn}"
        out = {}
        for key, value in node.items():
            resolved = self.resolve(value)
            if resolved is not _NO_VALUE:
                out[key] = resolved
        return out

    def _sub(self, name: str) -> str:
        if "." in name:
            resource, attribute = name.split(".", 1)
            return self.get_att(resource, attribute)
        return str(self.ref(name))

    def statements(self, process: str) -> list[dict[str, Any]]:
        resources = self.resources()
        found = []
        for policy in PROCESSES[process].policies:
            if policy in resources:
                assert resources[policy]["Type"] == "AWS::IAM::ManagedPolicy", policy
                found.extend(resources[policy]["Properties"]["PolicyDocument"]["Statement"])
        return found


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def allows(statements: Iterable[Mapping[str, Any]], action: str, resource: str, **context: str) -> bool:
    """Whether an Allow statement grants the action on the resource (Deny statements are not used; the
    conditions understood are the ones the template uses)."""
    for s in statements:
        if s.get("Effect") != "Allow":
            continue
        if not any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _as_list(s.get("Action"))):
            continue
        if not any(fnmatch.fnmatchcase(resource, r) for r in _as_list(s.get("Resource"))):
            continue
        if all(_condition_holds(op, tests, context) for op, tests in s.get("Condition", {}).items()):
            return True
    return False


def _condition_holds(operator: str, tests: Mapping[str, Any], context: Mapping[str, str]) -> bool:
    for key, patterns in tests.items():
        value = context.get(key)
        if value is None:
            return False
        wildcard = operator in ("StringLike", "ArnLike")
        assert operator in ("StringLike", "StringEquals", "ArnLike", "ArnEquals"), operator
        if not any(fnmatch.fnmatchcase(value, p) if wildcard else value == p for p in _as_list(patterns)):
            return False
    return True


# Sample resources of each kind, and what a request on them looks like.
def _bucket_level(action: str) -> bool:
    return action.startswith(("s3:List", "s3:GetBucket"))


def sample(target: str, action: str, rendered: Rendered) -> tuple[str, dict[str, str]]:
    if target in NOTIFY_RESOURCES:
        return NOTIFY_RESOURCES[target], {}
    if target == "queue":
        return rendered.get_att("EventQueue", "Arn"), {}
    if target == "glue":  # a table call is authorised on the catalog, the database and the table
        return f"arn:aws:glue:{REGION}:{ACCOUNT}:table/lake/orders", {}
    bucket, key = {
        "landing": (LANDING, "events/2026/11/24/orders 1.json"),
        "lake": (LAKE, f"{LAKE_PREFIX}/metadata/_delta_log/00000000000000000001.json"),
    }[target]
    if _bucket_level(action):
        return f"arn:aws:s3:::{bucket}", {"s3:prefix": key.rsplit("/", 1)[0] + "/"}
    return f"arn:aws:s3:::{bucket}/{key}", {}


def classify(resource: str) -> str:
    for service, parameter in NOTIFY_PARAMETERS.items():
        if resource in PARAMETERS[parameter].split(","):
            return f"notify-{service}"
    if resource.startswith("arn:aws:sqs:"):
        return "queue"
    if resource.startswith("arn:aws:kms:"):
        return "kms"
    if resource.startswith(f"arn:aws:glue:{REGION}:{ACCOUNT}:"):
        return "glue"
    if resource.startswith(f"arn:aws:s3:::{LANDING}"):
        return "landing"
    if resource.startswith(f"arn:aws:s3:::{LAKE}"):
        return "lake"
    raise AssertionError(f"a policy grants on an unexpected resource {resource}")


# ----------------------------------------------------------------------------------------- code scan


@dataclass(frozen=True)
class Call:
    module: str  # repository-relative path
    line: int
    operation: str
    service: str  # "sqs" | "s3" | ... | "pyarrow.fs"


@cache
def _operations_by_service(services: frozenset[str]) -> dict[str, str]:
    session = botocore.session.get_session()
    found: dict[str, str] = {}
    for service in sorted(services):
        for name in session.get_service_model(service).operation_names:
            found[xform_name(name)] = service
    return found


def _client_services(trees: Mapping[str, ast.AST]) -> frozenset[str]:
    """Services the code makes boto3 clients for: `aws.client(options, "sqs")`, `session.client("s3")`."""
    services = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "client"
            ):
                for arg in node.args[:2]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        services.add(arg.value)
    return frozenset(services)


def _imports_pyarrow_fs(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "pyarrow.fs" for a in node.names):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.module in ("pyarrow.fs", "pyarrow")
            and any(a.name == "fs" or node.module == "pyarrow.fs" for a in node.names)
        ):
            return True
    return False


@cache
def code_calls() -> tuple[Call, ...]:
    trees = {
        path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    operations = _operations_by_service(_client_services(trees))
    calls = []
    for module, tree in trees.items():
        fs = _imports_pyarrow_fs(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                service = operations.get(node.attr)
                if service in CLIENT_MODULES and module not in CLIENT_MODULES[service]:
                    continue
                if module in SETUP_CALLS and node.attr in SETUP_CALLS[module]:
                    continue
                if node.attr in operations:
                    calls.append(Call(module, node.lineno, node.attr, operations[node.attr]))
                elif fs and node.attr in PYARROW_FS_METHODS:
                    calls.append(Call(module, node.lineno, node.attr, "pyarrow.fs"))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get_paginator", "get_waiter")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                name = str(node.args[0].value)
                calls.append(Call(module, node.lineno, name, operations.get(name, "?")))
    return tuple(calls)


@cache
def passes_version_id(module: str) -> bool:
    text = (ROOT / module).read_text(encoding="utf-8")
    return '"VersionId"' in text or "'VersionId'" in text


def _matches(module: str, pattern: str) -> bool:
    # "*" stays within the folder for modules (`ingest/*` also covers `ingest/files/`: fnmatch's * does)
    return fnmatch.fnmatchcase(module, pattern)


def _excluded(module: str) -> bool:
    return any(_matches(module, pattern) for pattern in NOT_A_PROCESS)


def calls_of(process: str) -> list[Call]:
    spec = PROCESSES[process].modules
    found = []
    for call in code_calls():
        for pattern, only in spec.items():
            if _matches(call.module, pattern) and (only is None or call.operation in only):
                found.append(call)
                break
    return found


def target_of(call: Call) -> str:
    if call.module == NOTIFY_MODULE:
        return f"notify-{call.service}"
    if call.service == "sqs":
        return "queue"
    if call.service == "glue":
        return "glue"
    target = S3_TARGET_OF_MODULE.get(call.module)
    assert target is not None, (
        f"{call.module}:{call.line} calls {call.operation} on S3: say which bucket in "
        "S3_TARGET_OF_MODULE (landing or lake) and grant it in deploy/aws/s3events.yaml"
    )
    return target


def required(process: str) -> dict[tuple[str, str], list[str]]:
    """(action, target) -> where the code needs it."""
    needs: dict[tuple[str, str], list[str]] = {}
    for call in calls_of(process):
        actions = OPERATION_ACTIONS[call.operation]
        if call.operation in VERSIONED_READS and passes_version_id(call.module):
            actions = (*actions, VERSIONED_READS[call.operation])
        for action in actions:
            needs.setdefault((action, target_of(call)), []).append(
                f"{call.module}:{call.line} {call.operation}"
            )
    for action in DELTA_ACTIONS[PROCESSES[process].delta]:
        needs.setdefault((action, "lake"), []).append(f"Delta tables ({PROCESSES[process].delta})")
    return needs


# ----------------------------------------------------------------------------------------------- tests


def test_template_passes_cfn_lint() -> None:
    matches = cfnlint.api.lint(template_text(), regions=["us-east-1", "eu-west-1"])
    assert not matches, "\n".join(str(m) for m in matches)


def test_every_aws_call_in_the_code_is_mapped_to_iam_actions() -> None:
    unknown = sorted(
        f"{c.module}:{c.line} {c.operation} ({c.service})"
        for c in code_calls()
        if c.operation not in OPERATION_ACTIONS and not _excluded(c.module)
    )
    assert not unknown, (
        "AWS operations with no IAM mapping; add them to OPERATION_ACTIONS in this test and grant them "
        "in deploy/aws/s3events.yaml (and docs/aws-setup.md):\n" + "\n".join(unknown)
    )


def test_every_module_that_calls_aws_belongs_to_a_process() -> None:
    mapped = {c for process in PROCESSES for c in calls_of(process)}
    orphans = sorted(
        f"{c.module}:{c.line} {c.operation}"
        for c in code_calls()
        if c not in mapped and not _excluded(c.module)
    )
    assert not orphans, (
        "AWS calls in modules no process is mapped to; add the module to PROCESSES (or NOT_A_PROCESS "
        "with a reason):\n" + "\n".join(orphans)
    )


def test_the_scan_finds_the_calls_we_know_about() -> None:
    """Guards the scan itself: if these disappear, the AST matching broke, not the code."""
    found = {(c.module, c.operation) for c in code_calls()}
    for expected in [
        ("s3events/capture/queue.py", "receive_message"),
        ("s3events/capture/queue.py", "delete_message_batch"),
        ("s3events/capture/queue.py", "change_message_visibility_batch"),
        ("s3events/backfill/s3_lister.py", "list_objects_v2"),
        ("s3events/backfill/s3_lister.py", "list_object_versions"),
        ("s3events/ingest/files/objects.py", "get_object"),
        ("s3events/preflight.py", "head_bucket"),
        ("s3events/preflight.py", "put_object"),
        ("s3events/infra/parquet_files.py", "open_output_stream"),
    ]:
        assert expected in found, expected


@pytest.mark.parametrize("process", sorted(PROCESSES))
@pytest.mark.parametrize("kms", [False, True], ids=["sse-s3", "sse-kms"])
def test_each_process_policy_allows_what_its_code_calls(process: str, kms: bool) -> None:
    rendered = Rendered(**({"QueueKmsKeyArn": QUEUE_KEY, "LandingKmsKeyArn": LANDING_KEY} if kms else {}))
    statements = rendered.statements(process)
    missing = []
    for (action, target), where in sorted(required(process).items()):
        resource, context = sample(target, action, rendered)
        if not allows(statements, action, resource, **context):
            missing.append(f"{action} on {resource} {context or ''} (needed by {', '.join(where[:3])})")
    assert not missing, f"the {process} policy in {TEMPLATE.name} lacks:\n" + "\n".join(missing)


@pytest.mark.parametrize("process", sorted(PROCESSES))
def test_each_process_policy_grants_nothing_else(process: str) -> None:
    rendered = Rendered()
    granted = set()
    for s in rendered.statements(process):
        assert s["Effect"] == "Allow"
        for action in _as_list(s["Action"]):
            assert "*" not in action, f"{process}: wildcard action {action}"
            for resource in _as_list(s["Resource"]):
                granted.add((action, classify(resource)))
    needed = set(required(process)) | {(a, t) for (p, a, t) in EXTRA_GRANTS if p == process}
    assert granted - needed == set(), f"{process} is granted more than its code calls"
    assert needed - granted == set(), f"{process} lacks grants"


def test_lake_grants_stop_at_the_lake_prefix() -> None:
    rendered = Rendered()
    for process in PROCESSES:
        statements = rendered.statements(process)
        assert not allows(statements, "s3:GetObject", f"arn:aws:s3:::{LAKE}/elsewhere/x.json"), process
        assert not allows(statements, "s3:ListBucket", f"arn:aws:s3:::{LAKE}", **{"s3:prefix": "elsewhere/"})
        assert allows(statements, "s3:ListBucket", f"arn:aws:s3:::{LAKE}", **{"s3:prefix": f"{LAKE_PREFIX}/"})
        # a bucket named like the lake with a longer name is not the lake
        assert not allows(statements, "s3:GetObject", f"arn:aws:s3:::{LAKE}-2/{LAKE_PREFIX}/x"), process
    writers = [p for p, spec in PROCESSES.items() if spec.delta == "write"]
    assert "status" not in writers
    assert not allows(rendered.statements("status"), "s3:PutObject", f"arn:aws:s3:::{LAKE}/{LAKE_PREFIX}/x")


def test_status_modules_make_no_delta_writes() -> None:
    """status is declared a Delta reader: its own modules must not call a deltalake write."""
    for path in sorted((PACKAGE / "status").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name)
                else ""
            )
            assert name not in DELTA_WRITE_CALLS, f"{path}:{getattr(node, 'lineno', '?')} {name}"


@pytest.mark.parametrize("kms", [False, True], ids=["sse-s3", "sse-kms"])
def test_kms_keys_reach_exactly_the_processes_that_decrypt(kms: bool) -> None:
    rendered = Rendered(**({"QueueKmsKeyArn": QUEUE_KEY, "LandingKmsKeyArn": LANDING_KEY} if kms else {}))
    for process in PROCESSES:
        statements = rendered.statements(process)
        assert allows(statements, "kms:Decrypt", QUEUE_KEY) == (kms and process == "capture"), process
        assert allows(statements, "kms:Decrypt", LANDING_KEY) == (kms and process == "ingest"), process
    resources = rendered.resources()
    queue = resources["EventQueue"]["Properties"]
    if kms:
        assert queue["KmsMasterKeyId"] == QUEUE_KEY and "SqsManagedSseEnabled" not in queue
        assert (
            f"arn:aws:iam::{ACCOUNT}:policy/{STACK}-CaptureQueueKeyPolicy"
            in (resources["CaptureRole"]["Properties"]["ManagedPolicyArns"])
        )
    else:
        assert queue["SqsManagedSseEnabled"] is True and "KmsMasterKeyId" not in queue


def test_queue_dead_letter_queue_and_queue_policy() -> None:
    resources = Rendered(MaxReceiveCount="7").resources()
    queue = resources["EventQueue"]["Properties"]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-events-dlq",
        "maxReceiveCount": "7",
    }
    assert (
        queue["MessageRetentionPeriod"]
        == resources["DeadLetterQueue"]["Properties"]["MessageRetentionPeriod"]
    )
    policy = resources["EventQueuePolicy"]["Properties"]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"] == f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-events"
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": f"arn:aws:s3:::{LANDING}"},
        "StringEquals": {"aws:SourceAccount": ACCOUNT},
    }
    # S3 validates the destination when the notification is saved: the policy must come first.
    assert template()["Resources"]["LandingBucket"]["DependsOn"] == "EventQueuePolicy"


@pytest.mark.parametrize("prefix", ["events/", ""])
def test_bucket_notification_sends_what_capture_captures(prefix: str) -> None:
    resources = Rendered(NotificationPrefix=prefix).resources()
    configs = resources["LandingBucket"]["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    assert sorted(c["Event"] for c in configs) == ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
    for config in configs:
        assert config["Queue"] == f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-events"
        if prefix:
            assert config["Filter"] == {"S3Key": {"Rules": [{"Name": "prefix", "Value": prefix}]}}
        else:
            assert "Filter" not in config  # S3 rejects an empty prefix rule


def test_existing_bucket_mode_creates_no_bucket_but_admits_it() -> None:
    resources = Rendered(CreateLandingBucket="false").resources()
    assert "LandingBucket" not in resources
    (statement,) = resources["EventQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == f"arn:aws:s3:::{LANDING}"


def test_no_roles_mode_keeps_the_policies() -> None:
    resources = Rendered(RolePrincipalService="none").resources()
    assert not [r for r in resources.values() if r["Type"] == "AWS::IAM::Role"]
    assert {"CapturePolicy", "IngestPolicy", "BackfillPolicy", "MaintainPolicy", "StatusPolicy"} <= set(
        resources
    )


@pytest.mark.parametrize("kms", [False, True], ids=["sse-s3", "sse-kms"])
def test_each_role_carries_its_process_policies(kms: bool) -> None:
    rendered = Rendered(**({"QueueKmsKeyArn": QUEUE_KEY, "LandingKmsKeyArn": LANDING_KEY} if kms else {}))
    resources = rendered.resources()
    for process, spec in PROCESSES.items():
        role = resources[f"{process.capitalize()}Role"]["Properties"]
        expected = [rendered.ref(p) for p in spec.policies if p in resources]
        assert role["ManagedPolicyArns"] == expected, process
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_runbook_properties_block_is_the_shipped_example() -> None:
    """docs/runbook.md shows conf/production.example.properties; test_config loads and validates the
    file, so the block a reader copies is valid too."""
    runbook = (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```properties\n(.*?)```", runbook, flags=re.S)
    shipped = (ROOT / "conf" / "production.example.properties").read_text(encoding="utf-8")
    assert blocks == [shipped]


def test_without_notification_destinations_ingest_gets_no_notification_grant() -> None:
    """The defaults (no destinations) drop the three conditional statements whole, leaving no null item."""
    empty = {parameter: "" for parameter in NOTIFY_PARAMETERS.values()}
    statements = Rendered(**empty).resources()["IngestPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert all(isinstance(s, dict) for s in statements)
    actions = {a for s in statements for a in _as_list(s["Action"])}
    assert not actions & {"sns:Publish", "sqs:SendMessage", "events:PutEvents"}
    with_all = Rendered().resources()["IngestPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert len(with_all) == len(statements) + 3
