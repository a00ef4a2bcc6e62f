"""`s3events setup [--dry-run | --verify]` and `s3events teardown --yes`: read the state, plan, print,
apply. Returns the exit code (0 done or intact, 1 a broken link found by --verify, 2 teardown without
--yes); errors raise through the CLI's mapping (ConfigError 2, FatalError 3)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from s3events.config import Settings, keys
from s3events.errors import ConfigError
from s3events.infra import aws
from s3events.setup import probe
from s3events.setup.aws_state import Clients, apply, read_state
from s3events.setup.links import Link, check_links
from s3events.setup.model import Plan, SetupSpec, queue_name_and_account
from s3events.setup.plan import plan_setup, plan_teardown, receive_count_warnings


def spec_from(settings: Settings) -> SetupSpec:
    queue_url = settings.require(keys.QUEUE_URL)
    try:
        name, _ = queue_name_and_account(queue_url)
    except ValueError as exc:
        raise ConfigError(keys.QUEUE_URL.name, str(exc)) from None
    if name.endswith(".fifo"):
        raise ConfigError(
            keys.QUEUE_URL.name, f"{name} is a FIFO queue; S3 notifications go to standard queues only"
        )
    prefixes = settings.get(keys.SETUP_PREFIXES)
    probe_prefix = settings.require(keys.SETUP_PROBE_PREFIX)
    if prefixes and not any(probe_prefix.startswith(p) for p in prefixes):
        raise ConfigError(
            keys.SETUP_PROBE_PREFIX.name,
            f"{probe_prefix!r} lies outside every prefix of {keys.SETUP_PREFIXES.name} "
            f"({', '.join(prefixes)}): no notification would report the probe",
        )
    return SetupSpec(
        queue_url=queue_url,
        dead_letter_queue_name=settings.require(keys.SETUP_DEAD_LETTER_QUEUE_NAME),
        max_receive_count=settings.get(keys.SETUP_DEAD_LETTER_MAX_RECEIVE_COUNT),
        buckets=settings.get(keys.SETUP_BUCKETS),
        prefixes=prefixes,
        suffixes=settings.get(keys.SETUP_SUFFIXES),
        events=settings.get(keys.SETUP_EVENTS),
        bucket_account=settings.get(keys.SETUP_BUCKET_ACCOUNT),
        probe_prefix=probe_prefix,
        verify_timeout_seconds=settings.get(keys.SETUP_VERIFY_TIMEOUT_SECONDS),
    )


def _print_plan(out: TextIO, title: str, plan: Plan) -> None:
    print(title, file=out)
    for line in plan.lines():
        print(f"  {line}", file=out)


def run_setup(settings: Settings, *, dry_run: bool, out: TextIO) -> int:
    from s3events.setup.catalog import setup_catalog

    spec = spec_from(settings)
    clients = Clients(aws.options_from(settings))
    plan = plan_setup(spec, read_state(clients, spec))
    setup_catalog(settings, dry_run=dry_run, out=out)  # the database target tables are registered in
    if dry_run:
        _print_plan(
            out, f"s3events setup --dry-run: queue {spec.queue_name}, buckets {', '.join(spec.buckets)}", plan
        )
        print(f"{len(plan.actions)} change(s) planned; nothing was written", file=out)
        return 0
    _print_plan(out, f"s3events setup: queue {spec.queue_name}, buckets {', '.join(spec.buckets)}", plan)
    if not plan.actions:
        print("nothing to change: the notification path is as configured", file=out)
        return 0
    apply(clients, spec, plan.actions)
    print(f"{len(plan.actions)} change(s) made", file=out)
    return 0


def static_links(settings: Settings) -> list[Link]:
    """Every link of the configured notification path checked from the state alone (no probe): what
    `status` reports. Empty when no `s3events.setup.buckets` are configured."""
    if not settings.get(keys.SETUP_BUCKETS):
        return []
    spec = spec_from(settings)
    return check_links(spec, read_state(Clients(aws.options_from(settings)), spec))


def run_verify(settings: Settings, *, out: TextIO, clock: Callable[[], float] = time.monotonic) -> int:
    """Check every link from the state, then send a probe through each bucket whose links are intact,
    unless the queue holds messages: a receive would count toward their redrive, so then only the
    static links are checked, and the output says so."""
    spec = spec_from(settings)
    clients = Clients(aws.options_from(settings))
    state = read_state(clients, spec)
    links = check_links(spec, state)
    backlog = probe.waiting(state.queue.attributes) if state.queue is not None else 0
    if state.queue is not None:
        held: dict[str, Mapping[str, Any]] = {}
        try:
            for bucket in spec.buckets:
                name = f"probe through bucket {bucket}"
                broken = [
                    link.name
                    for link in links
                    if not link.ok
                    and (link.name.endswith(f"bucket {bucket}") or link.name == f"queue {spec.queue_name}")
                ]
                if broken:
                    links.append(Link(name, skipped=f"{broken[0]} is broken"))
                elif backlog:
                    links.append(Link(name, skipped=f"queue {spec.queue_name} holds {backlog} message(s)"))
                else:
                    links.append(
                        probe.probe_bucket(clients.sqs, clients.s3, spec, bucket, held=held, clock=clock)
                    )
        finally:
            probe.hand_back(clients.sqs, spec.queue_url, held)
    print(f"s3events setup --verify: queue {spec.queue_name}, buckets {', '.join(spec.buckets)}", file=out)
    for link in links:
        print(f"  {link.line()}", file=out)
    for warning in receive_count_warnings(spec):
        print(f"  warning  {warning}", file=out)
    broken_count = sum(1 for link in links if not link.ok)
    if backlog:
        print(
            f"no probe was sent: queue {spec.queue_name} holds {backlog} message(s) (waiting, in flight or "
            "delayed), and every receive counts toward a message's redrive to the dead-letter queue, so "
            "verify receives only from an empty queue; the links above were checked from their "
            "configuration. Run it again once capture has drained the queue.",
            file=out,
        )
    if broken_count:
        print(f"{broken_count} link(s) broken", file=out)
    elif backlog:
        print("the links checked are intact (no end-to-end probe)", file=out)
    else:
        print("the notification path is intact", file=out)
    return 0 if not broken_count else 1


def run_teardown(settings: Settings, *, yes: bool, dry_run: bool, out: TextIO, err: TextIO) -> int:
    spec = spec_from(settings)
    clients = Clients(aws.options_from(settings))
    plan = plan_teardown(spec, read_state(clients, spec))
    _print_plan(out, f"s3events teardown: queue {spec.queue_name}, buckets {', '.join(spec.buckets)}", plan)
    if not plan.actions:
        print("nothing to remove: nothing s3events setup created is left", file=out)
        return 0
    if dry_run:
        print(f"{len(plan.actions)} removal(s) planned; nothing was changed", file=out)
        return 0
    if not yes:
        print("s3events: teardown refused: pass --yes to remove what is listed above", file=err)
        return 2
    apply(clients, spec, plan.actions)
    print(f"{len(plan.actions)} removal(s) made", file=out)
    return 0
