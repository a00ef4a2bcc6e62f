"""A bucket's notification configuration: our queue configurations, merged into the others the bucket
already has (PutBucketNotificationConfiguration replaces the whole set), and the overlap rule.

S3 rejects, and anyone's notifications would go missing if it did not, two configurations whose filters
overlap and that share an event type: filters overlap when one prefix starts with the other and one
suffix ends with the other (an empty prefix or suffix overlaps everything).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from s3events.errors import ConfigError

ALL_OBJECT_EVENTS = ("s3:ObjectCreated:*", "s3:ObjectRemoved:*")
KINDS = {
    "QueueConfigurations": "QueueArn",
    "TopicConfigurations": "TopicArn",
    "LambdaFunctionConfigurations": "LambdaFunctionArn",
}


def key_filter(prefix: str = "", suffix: str = "") -> dict[str, Any] | None:
    """The `Filter` of a configuration covering keys with this prefix and suffix (None: every key)."""
    rules = [
        {"Name": name, "Value": value} for name, value in (("prefix", prefix), ("suffix", suffix)) if value
    ]
    return {"Key": {"FilterRules": rules}} if rules else None


def filter_of(configuration: Mapping[str, Any]) -> tuple[str, str]:
    """(prefix, suffix) of a configuration; S3 answers rule names as Prefix/Suffix, requests use either."""
    found = {"prefix": "", "suffix": ""}
    for rule in configuration.get("Filter", {}).get("Key", {}).get("FilterRules", []):
        found[str(rule.get("Name", "")).lower()] = str(rule.get("Value", ""))
    return found["prefix"], found["suffix"]


def _event_covers(wide: str, narrow: str) -> bool:
    return wide == narrow or (wide.endswith(":*") and narrow.startswith(wide[:-1]))


def events_overlap(a: Iterable[str], b: Iterable[str]) -> bool:
    b = list(b)
    return any(_event_covers(x, y) or _event_covers(y, x) for x in a for y in b)


def filters_overlap(a: tuple[str, str], b: tuple[str, str]) -> bool:
    (pa, sa), (pb, sb) = a, b
    return (pa.startswith(pb) or pb.startswith(pa)) and (sa.endswith(sb) or sb.endswith(sa))


def configuration_id(id_prefix: str, prefix: str, suffix: str) -> str:
    digest = hashlib.sha256(f"{prefix}\x00{suffix}".encode()).hexdigest()[:12]
    return f"{id_prefix}{digest}"


def ours(
    *, id_prefix: str, queue_arn: str, filters: Sequence[tuple[str, str]], events: Sequence[str]
) -> list[dict[str, Any]]:
    """Our queue configurations: one per (prefix, suffix)."""
    result = []
    for prefix, suffix in filters:
        config: dict[str, Any] = {
            "Id": configuration_id(id_prefix, prefix, suffix),
            "QueueArn": queue_arn,
            "Events": list(events),
        }
        filter_ = key_filter(prefix, suffix)
        if filter_:
            config["Filter"] = filter_
        result.append(config)
    return result


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # QueueConfigurations | TopicConfigurations | LambdaFunctionConfigurations
    configuration: Mapping[str, Any]

    @property
    def id(self) -> str:
        return str(self.configuration.get("Id", ""))

    @property
    def destination(self) -> str:
        return str(self.configuration.get(KINDS[self.kind], ""))

    @property
    def events(self) -> list[str]:
        return [str(e) for e in self.configuration.get("Events", [])]

    def describe(self) -> str:
        prefix, suffix = filter_of(self.configuration)
        events = ", ".join(self.events)
        return f"{self.id!r} ({events}; prefix {prefix!r}, suffix {suffix!r} -> {self.destination})"


def entries(configuration: Mapping[str, Any]) -> Iterator[Entry]:
    for kind in KINDS:
        for config in configuration.get(kind, []) or []:
            yield Entry(kind, config)


EVENTBRIDGE = "EventBridgeConfiguration"


def clean(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as PutBucketNotificationConfiguration takes it: no response metadata, no empty
    lists. An empty `EventBridgeConfiguration` is kept: it is how S3 says the bucket's EventBridge
    delivery is on (an empty element, parsed as `{}`), and a configuration written without it turns that
    delivery off for everyone."""
    return {
        k: v
        for k, v in configuration.items()
        if k != "ResponseMetadata" and v is not None and v != [] and (v != {} or k == EVENTBRIDGE)
    }


def _equivalent(entry: Entry, wanted: Mapping[str, Any]) -> bool:
    return (
        entry.kind == "QueueConfigurations"
        and entry.destination == wanted["QueueArn"]
        and set(entry.events) == set(wanted["Events"])
        and filter_of(entry.configuration) == filter_of(wanted)
    )


@dataclass(frozen=True, slots=True)
class Merged:
    configuration: dict[str, Any]
    added: tuple[str, ...]  # Ids of our configurations added or rewritten
    removed: tuple[str, ...]  # Ids of our configurations no longer wanted
    adopted: tuple[str, ...]  # configurations of another owner that already do exactly what ours would
    kept: int  # configurations of other owners, kept as they are

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def merge(
    existing: Mapping[str, Any], wanted: Sequence[Mapping[str, Any]], *, id_prefix: str, bucket: str
) -> Merged:
    """`existing` with our configurations set to `wanted`: other owners' entries (and EventBridge) kept
    as they are. Raises ConfigError naming both configurations when one of another owner overlaps ours."""
    current = clean(existing)
    others = [e for e in entries(current) if not e.id.startswith(id_prefix)]
    mine = {e.id: e for e in entries(current) if e.id.startswith(id_prefix)}
    adopted = []
    to_write: list[Mapping[str, Any]] = []
    for config in wanted:
        twin = next((e for e in others if _equivalent(e, config)), None)
        if twin is not None:
            adopted.append(twin.id)
            continue
        for other in others:
            if events_overlap(other.events, config["Events"]) and filters_overlap(
                filter_of(other.configuration), filter_of(config)
            ):
                raise ConfigError(
                    "s3events.setup.prefixes",
                    f"bucket {bucket}: its notification configuration {other.describe()} overlaps "
                    f"ours {Entry('QueueConfigurations', config).describe()}; S3 sends an event to one "
                    "configuration only, so change s3events.setup.prefixes/suffixes/events or remove "
                    "that configuration",
                )
        to_write.append(config)
    added = tuple(
        str(c["Id"])
        for c in to_write
        if c["Id"] not in mine or not _same(mine[str(c["Id"])].configuration, c)
    )
    wanted_ids = {c["Id"] for c in to_write}
    removed = tuple(i for i in mine if i not in wanted_ids)
    result = {k: v for k, v in current.items() if k not in KINDS}
    for kind in KINDS:
        kept = [dict(e.configuration) for e in others if e.kind == kind]
        if kind == "QueueConfigurations":
            kept += [dict(c) for c in to_write]
        if kept:
            result[kind] = kept
    return Merged(result, added, removed, tuple(adopted), len(others))


def without_ours(existing: Mapping[str, Any], *, id_prefix: str) -> Merged:
    """`existing` with every configuration of ours removed."""
    current = clean(existing)
    removed = tuple(e.id for e in entries(current) if e.id.startswith(id_prefix))
    result = {k: v for k, v in current.items() if k not in KINDS}
    for kind in KINDS:
        kept = [dict(e.configuration) for e in entries(current) if e.kind == kind and e.id not in removed]
        if kept:
            result[kind] = kept
    return Merged(result, (), removed, (), sum(1 for _ in entries(result)))


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (
        a.get("QueueArn") == b.get("QueueArn")
        and list(a.get("Events", [])) == list(b.get("Events", []))
        and filter_of(a) == filter_of(b)
    )


def covers(
    configuration: Mapping[str, Any], *, queue_arn: str, prefix: str, suffix: str, events: Sequence[str]
) -> bool:
    """Whether some queue configuration sends every one of `events` for keys with this prefix and suffix
    to the queue (whoever made it)."""
    for entry in entries(configuration):
        if entry.kind != "QueueConfigurations" or entry.destination != queue_arn:
            continue
        their_prefix, their_suffix = filter_of(entry.configuration)
        if (
            prefix.startswith(their_prefix)
            and suffix.endswith(their_suffix)
            and all(any(_event_covers(e, wanted) for e in entry.events) for wanted in events)
        ):
            return True
    return False


def check_own_filters(filters: Sequence[tuple[str, str]]) -> None:
    """Our own configurations may not overlap each other either (they share every event type)."""
    for i, a in enumerate(filters):
        for b in filters[i + 1 :]:
            if filters_overlap(a, b):
                raise ConfigError(
                    "s3events.setup.prefixes",
                    f"prefix {a[0]!r} suffix {a[1]!r} and prefix {b[0]!r} suffix {b[1]!r} overlap: S3 "
                    "rejects two configurations for the same keys and events; list only the outer prefix",
                )
