"""docker-compose.yml and the Dockerfile, checked without a Docker engine (there is none here).

Every command a service runs is parsed by the real parser it reaches (`s3events.cli.build_parser()`,
`python -m s3events.dev.provision`), every bind-mounted host path and every properties file a
command names must exist in the repository, and those properties files must load and validate.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml  # PyYAML, installed with moto (the test extra)

from s3events import cli
from s3events.config import Settings, keys, load_settings
from s3events.dev import provision
from s3events.ingest.target import target_specs

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
OUR_SERVICES = ("setup", "capture", "ingest")  # built from our Dockerfile
LONG_RUNNING = ("capture", "ingest")  # `s3events <command> --continuous` services


def _compose() -> dict[str, Any]:
    with COMPOSE.open(encoding="utf-8") as fp:
        data = yaml.safe_load(fp)
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), COMPOSE
    return data


def _services() -> dict[str, dict[str, Any]]:
    return _compose()["services"]


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, comments dropped and backslash continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        word, _, rest = text.partition(" ")
        instructions.append((word.upper(), rest.strip()))
    return instructions


def _exec_form(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(item) for item in value]
    text = value.strip()
    if text.startswith("["):
        return [str(item) for item in json.loads(text)]
    return shlex.split(text)


def _image_entrypoint() -> list[str]:
    found = [args for word, args in _dockerfile_instructions() if word == "ENTRYPOINT"]
    assert found, f"{DOCKERFILE} has no ENTRYPOINT"
    return _exec_form(found[-1])


def _argv(service: dict[str, Any]) -> list[str]:
    """What the container runs: the service's entrypoint (else the image's) followed by its command."""
    entrypoint = _exec_form(service["entrypoint"]) if "entrypoint" in service else _image_entrypoint()
    return entrypoint + _exec_form(service.get("command"))


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _bind_mounts(service: dict[str, Any]) -> list[tuple[Path, PurePosixPath, bool]]:
    """(host path in the repo, container path, read-only) of each bind mount (short or long syntax)."""
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, _, rest = volume.partition(":")
            target, _, mode = rest.partition(":")
            read_only = "ro" in mode.split(",")
        else:
            if volume.get("type") != "bind":
                continue
            source, target, read_only = volume["source"], volume["target"], bool(volume.get("read_only"))
        if not source.startswith((".", "/")):
            continue  # a named volume, not a host path
        mounts.append(((ROOT / source).resolve(), PurePosixPath(target), read_only))
    return mounts


def _host_path(service: dict[str, Any], container_path: str) -> Path:
    """The repository file that a bind mount puts at `container_path` inside the service's container."""
    wanted = PurePosixPath(container_path)
    for host, target, _ in _bind_mounts(service):
        if wanted == target or target in wanted.parents:
            return host / wanted.relative_to(target)
    raise AssertionError(f"{container_path} is not under any bind mount of {service}")


def _s3events_commands() -> list[tuple[str, list[str]]]:
    """(service name, argv after `s3events`) for every service running the s3events command."""
    commands = []
    for name, service in _services().items():
        # another image's entrypoint is unknown here; ours comes from the Dockerfile
        argv = _argv(service) if name in OUR_SERVICES or "entrypoint" in service else []
        if argv and argv[0] == "s3events":
            commands.append((name, argv[1:]))
    return commands


def _parse_cli(name: str, args: list[str]) -> Any:
    try:
        return cli.build_parser().parse_args(args)
    except SystemExit as exc:  # argparse reports the problem on stderr and exits 2
        command = shlex.join(["s3events", *args])
        raise AssertionError(f"service {name!r}: `{command}` is rejected by the CLI") from exc


def _settings_of(name: str) -> tuple[Path, Settings]:
    service = _services()[name]
    args = _parse_cli(name, _argv(service)[1:])
    host = _host_path(service, args.props)
    return host, load_settings(host, args.conf, env=_environment(service))


# ------------------------------------------------------------------------------------------- services


def test_compose_declares_the_services() -> None:
    services = _services()
    assert {"moto", "setup", "capture", "ingest"} <= set(services)
    moto = services["moto"]
    assert str(moto["image"]).startswith("motoserver/moto:")
    assert any(str(port).endswith(":5000") or str(port) == "5000" for port in moto["ports"])
    assert moto["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")


@pytest.mark.parametrize("name", OUR_SERVICES)
def test_our_services_build_the_repository_dockerfile(name: str) -> None:
    service = _services()[name]
    build = service["build"]
    context = build if isinstance(build, str) else build.get("context", ".")
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (ROOT / context / dockerfile).resolve() == DOCKERFILE
    # one image for both: one build
    assert service["image"] == _services()["capture"]["image"]


def test_start_order_moto_healthy_then_setup_completed_then_capture_and_ingest() -> None:
    services = _services()
    assert services["setup"]["depends_on"]["moto"]["condition"] == "service_healthy"
    for name in LONG_RUNNING:
        assert services[name]["depends_on"]["setup"]["condition"] == "service_completed_successfully", name
        assert services[name].get("restart") in ("unless-stopped", "always", "on-failure"), name
    assert services["setup"].get("restart", "no") == "no"  # one-shot


@pytest.mark.parametrize("name", OUR_SERVICES)
def test_our_services_get_fake_credentials_and_a_region_from_the_environment(name: str) -> None:
    env = _environment(_services()[name])
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(env)
    assert env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION")


# ------------------------------------------------------------------------------------------- commands


def test_every_s3events_command_parses_with_the_real_cli() -> None:
    commands = _s3events_commands()
    assert [name for name, _ in commands] == ["capture", "ingest"]
    for name, args in commands:
        parsed = _parse_cli(name, args)
        assert parsed.command in ("capture", "ingest", "backfill", "status", "demo"), args
    for name in LONG_RUNNING:
        parsed = _parse_cli(name, dict(commands)[name])
        assert parsed.command == name  # the service runs the command it is named after
        assert parsed.continuous and not parsed.once, name
        assert parsed.props == "/conf/docker.properties", name
    ingest = _parse_cli("ingest", dict(commands)["ingest"])
    assert ingest.target == [] and ingest.checkpoint is None  # every target, from its own checkpoint


def test_every_bind_mounted_host_path_exists() -> None:
    seen = 0
    for name, service in _services().items():
        for host, target, _ in _bind_mounts(service):
            assert host.exists(), f"service {name!r} mounts {host} (at {target}), which does not exist"
            assert host.is_relative_to(ROOT), f"service {name!r} mounts {host} from outside the repo"
            seen += 1
    assert seen
    for name in LONG_RUNNING:
        assert (ROOT / "conf", PurePosixPath("/conf"), True) in [
            (host, target, ro) for host, target, ro in _bind_mounts(_services()[name])
        ], f"{name} mounts ./conf read-only at /conf"


def test_every_referenced_properties_file_exists_loads_and_validates_for_its_command() -> None:
    for name, args in _s3events_commands():
        parsed = _parse_cli(name, args)
        if not parsed.props:
            continue
        host, settings = _settings_of(name)
        assert host.is_file(), f"service {name!r} reads {parsed.props}: {host} does not exist"
        # conf/*.properties are also checked for every command by tests/unit/test_config.py
        assert host.parent == ROOT / "conf", host
        settings.validate_for(parsed.command)
        settings.validate_for("capture")
        settings.validate_for("ingest")


def test_ingest_reads_what_capture_writes_with_local_spark_in_its_container() -> None:
    capture_host, capture = _settings_of("capture")
    ingest_host, ingest = _settings_of("ingest")
    assert ingest_host == capture_host
    for key in (keys.METADATA_TABLE_PATH, keys.AWS_ENDPOINT_URL, keys.AWS_REGION):
        assert ingest.get(key) == capture.get(key), key.name
    assert _environment(_services()["ingest"]) == _environment(_services()["capture"])
    specs = target_specs(ingest)  # every declared target resolves: path, format, routing, limits
    assert specs, "docker.properties declares no ingest target"
    for spec in specs:
        assert urlparse(spec.path).scheme == "s3", f"target {spec.name}: {spec.path} is not on the endpoint"
    # No cluster in the stack: the ingest container runs Spark in-process.
    master = ingest.get(keys.SPARK_MASTER)  # unset: local[*], since the container runs no spark-submit
    assert master is None or master.startswith("local"), master


def test_setup_runs_provision_with_flags_its_parser_accepts_and_matching_the_properties(monkeypatch) -> None:
    argv = _argv(_services()["setup"])
    assert argv[:3] == ["python", "-m", "s3events.dev.provision"], argv
    made: dict[str, Any] = {}
    buckets: list[str] = []

    def fake_notifying_bucket(options: Any, **kwargs: Any) -> provision.Provisioned:
        made.update(kwargs, endpoint_url=options.endpoint_url, region=options.region)
        url = f"{options.endpoint_url}/123456789012/{kwargs['queue']}"
        return provision.Provisioned(bucket=kwargs["bucket"], queue_url=url, queue_arn="arn")

    monkeypatch.setattr(provision, "notifying_bucket", fake_notifying_bucket)
    monkeypatch.setattr(provision, "_ensure_bucket", lambda s3, bucket: buckets.append(bucket))
    monkeypatch.setattr(provision.aws, "client", lambda options, service: object())
    try:
        assert provision.main(argv[3:]) == 0
    except SystemExit as exc:
        raise AssertionError(f"setup's arguments {argv[3:]} are rejected by provision's parser") from exc

    # what setup creates is what capture's properties point at
    _, settings = _settings_of("capture")
    assert made["endpoint_url"] == settings.get(keys.AWS_ENDPOINT_URL)
    assert made["region"] == settings.get(keys.AWS_REGION)
    queue_url = settings.get(keys.QUEUE_URL)
    assert queue_url is not None and queue_url.rsplit("/", 1)[1] == made["queue"]
    assert urlparse(queue_url).netloc == urlparse(made["endpoint_url"]).netloc
    metadata = urlparse(str(settings.get(keys.METADATA_TABLE_PATH)))
    assert metadata.scheme == "s3" and buckets == [metadata.netloc]
    assert made["bucket"] == "s3events-landing"
    for target in settings.targets:
        path = urlparse(str(settings.get_for(target, keys.TARGET_PATH)))
        assert path.scheme != "s3" or path.netloc in buckets, f"target {target}: {path.netloc} is not created"


# ------------------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_copy_sources_exist() -> None:
    copies = [args for word, args in _dockerfile_instructions() if word in ("COPY", "ADD")]
    assert copies
    for args in copies:
        parts = [part for part in _exec_form(args) if not part.startswith("--")]
        if any(part.startswith("--from") for part in _exec_form(args)):
            continue  # from another stage or image, not the build context
        *sources, _destination = parts
        assert sources, args
        for source in sources:
            assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repository"


def test_dockerfile_entrypoint_is_the_console_script() -> None:
    assert _image_entrypoint() == ["s3events"]
    # bin/s3events_main.py (the spark-submit entry) ships in the image too
    assert any(word == "COPY" and args.split()[0] == "bin" for word, args in _dockerfile_instructions())


def test_prometheus_scrapes_capture_and_ingest_on_the_metrics_port_of_their_properties() -> None:
    prometheus = _services()["prometheus"]
    assert str(prometheus["image"]).startswith("prom/prometheus:")
    mounts = {str(container): host for host, container, _ in _bind_mounts(prometheus)}
    config_dir = mounts["/etc/prometheus"]
    assert config_dir == ROOT / "deploy" / "prometheus"
    config = yaml.safe_load((config_dir / "prometheus.yml").read_text(encoding="utf-8"))
    assert all((config_dir / name).is_file() for name in config["rule_files"])
    scraped = {t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    for name in LONG_RUNNING:
        _, settings = _settings_of(name)
        assert settings.get(keys.METRICS_HOST) == "0.0.0.0"  # reachable from the prometheus container
        assert f"{name}:{settings.get(keys.METRICS_PORT)}" in scraped
        assert name in prometheus["depends_on"]
