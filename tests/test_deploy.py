"""deploy/ agrees with the code: Dockerfiles, compose stack, Kubernetes manifest, systemd unit.

Docker and Kubernetes cannot run on the test machine, so every file is parsed (YAML with PyYAML, the
Dockerfiles instruction by instruction, the unit with configparser) and checked against the code:
the port (`HttpSettings().port`) everywhere it appears and the 0.0.0.0 bind inside containers, the
probe and health paths (served by `server.http_app`), every `TRACING_EVAL_*` variable (a real key of
`Settings`), every embedded TOML (loads with `load_settings`), every `tracing-eval` command line
(parsed by the real CLI), the console script in the entrypoints, and a non-root user everywhere.
The example app runs for one round with the files its Dockerfile copies, against a capture endpoint.
"""

from __future__ import annotations

import base64
import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import REPO
from tests.support.commands import SCRIPT, check_cli, commands_in_markdown
from tests.support.fakes.loopback import LoopbackServer
from tracing_eval import app, configdoc, server, worker
from tracing_eval.config import ENV_PREFIX, HttpSettings, ReceiverSettings, Settings, load_settings
from tracing_eval.connectors.otlp.decode import decode_traces, decompress, media_type
from tracing_eval.ingest import conversation_ids
from tracing_eval.store.history import Chains

DEPLOY = REPO / "deploy"
PORT = HttpSettings().port
CONFIG_PATH = "/etc/tracing-eval/tracing-eval.toml"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
#: Image tags as `reference/langfuse.md` §14 states them for the v4 stack (MinIO: no tag given).
LANGFUSE_IMAGES = {
    "langfuse-web": "langfuse/langfuse:4",
    "langfuse-worker": "langfuse/langfuse-worker:4",
    "clickhouse": "clickhouse/clickhouse-server:25.12",
    "redis": "redis:7",
    "postgres": "postgres:17",
    "minio": "minio/minio",
}
#: The environment Langfuse's web and worker containers need (Langfuse's docker-compose.yml).
LANGFUSE_ENV = {
    "DATABASE_URL",
    "SALT",
    "ENCRYPTION_KEY",
    "NEXTAUTH_URL",
    "CLICKHOUSE_MIGRATION_URL",
    "CLICKHOUSE_URL",
    "CLICKHOUSE_USER",
    "CLICKHOUSE_PASSWORD",
    "CLICKHOUSE_CLUSTER_ENABLED",
    "LANGFUSE_S3_EVENT_UPLOAD_BUCKET",
    "LANGFUSE_S3_EVENT_UPLOAD_REGION",
    "LANGFUSE_S3_EVENT_UPLOAD_ACCESS_KEY_ID",
    "LANGFUSE_S3_EVENT_UPLOAD_SECRET_ACCESS_KEY",
    "LANGFUSE_S3_EVENT_UPLOAD_ENDPOINT",
    "LANGFUSE_S3_EVENT_UPLOAD_FORCE_PATH_STYLE",
    "REDIS_HOST",
    "REDIS_PORT",
    "REDIS_AUTH",
}
SECRET_ENV = {"OPENAI_API_KEY", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"}
OTHER_ENV = {name for var in configdoc.OTHER_VARIABLES for name in var.names}


# -- helpers -------------------------------------------------------------------------------------


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        instruction, _, args = text.partition(" ")
        out.append((instruction.upper(), args.strip()))
    assert not pending, f"{path}: dangling line continuation"
    return out


def args_of(instructions: list[tuple[str, str]], name: str) -> list[str]:
    return [args for instr, args in instructions if instr == name]


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not exec form: {args}"
    return value


def env_instructions(instructions: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in args_of(instructions, "ENV"):
        for word in shlex.split(args):
            key, sep, value = word.partition("=")
            assert sep, f"ENV {args}: use KEY=value"
            env[key] = value
    return env


def settings_env_ok(name: str) -> bool:
    """A real settings variable: a key, a section (JSON), or one entry of a table-typed key."""
    if name in configdoc.leaf_env_names():
        return True
    tables = {
        configdoc.env_name((*s.path, key))
        for s in configdoc.sections()
        if not s.array
        for key, f in s.model.model_fields.items()
        if configdoc.type_name(f.annotation).startswith("table")
    }
    return any(name.startswith(t + "__") for t in tables)


def assert_address(value: str) -> None:
    """Inside a container: every interface, the documented port."""
    settings = HttpSettings(address=value)
    assert (settings.host, settings.port) == ("0.0.0.0", PORT), value


def load_toml_text(text: str, tmp_path: Path, name: str = "embedded.toml") -> Settings:
    path = tmp_path / name
    path.write_text(text)
    return load_settings(path)


def served_paths() -> set[str]:
    """Paths the sidecar's HTTP server answers (with a worker: /readyz and /metrics too)."""
    return {route.path for route in server.http_app((), SimpleNamespace()).routes}


def check_run_args(words: list[str]) -> None:
    """`tracing-eval <words>` parses, and its --config/--source/--http values are the deploy ones."""
    parsed = check_cli(words)
    config = parsed.options.get("config_path")
    if config is not None:
        assert config == CONFIG_PATH, f"--config {config}: the deploy files use {CONFIG_PATH}"
    if parsed.options.get("sources"):
        app.source_specs(parsed.options["sources"], Settings())  # unknown specs raise
    if parsed.options.get("http"):
        assert_address(str(parsed.options["http"]))


def console_script() -> str:
    (name,) = PYPROJECT["project"]["scripts"]
    assert name == SCRIPT
    return name


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# -- the sidecar image ---------------------------------------------------------------------------

SIDECAR = dockerfile(DEPLOY / "Dockerfile")
APP_DOCKERFILE = DEPLOY / "example-app" / "Dockerfile"
APP = dockerfile(APP_DOCKERFILE)


def min_python() -> tuple[int, int]:
    found = re.search(r">=\s*(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert found
    return int(found[1]), int(found[2])


@pytest.mark.parametrize("instructions", [SIDECAR, APP], ids=["sidecar", "example-app"])
def test_images_are_slim_python_at_the_supported_version(instructions: list[tuple[str, str]]) -> None:
    (base,) = args_of(instructions, "FROM")
    found = re.fullmatch(r"python:(\d+)\.(\d+)-slim(-[a-z]+)?", base)
    assert found, f"FROM {base}: expected python:X.Y-slim"
    assert (int(found[1]), int(found[2])) >= min_python()


@pytest.mark.parametrize("instructions", [SIDECAR, APP], ids=["sidecar", "example-app"])
def test_images_run_as_a_non_root_user(instructions: list[tuple[str, str]]) -> None:
    order = [instr for instr, _ in instructions]
    users = args_of(instructions, "USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    assert user.isdigit(), "a numeric USER lets Kubernetes verify runAsNonRoot"
    assert max(i for i, x in enumerate(order) if x == "USER") < order.index("ENTRYPOINT")


@pytest.mark.parametrize(
    ("path", "instructions"), [(DEPLOY / "Dockerfile", SIDECAR), (APP_DOCKERFILE, APP)], ids=["sidecar", "example-app"]
)
def test_copied_files_exist_and_the_dockerignore_lets_them_through(path: Path, instructions: list) -> None:
    ignore = path.with_name(path.name + ".dockerignore").read_text().splitlines()
    allowed = [line[1:].rstrip("/") for line in ignore if line.startswith("!")]
    assert ignore and "*" in ignore, "the build context is the repository root: ignore everything else"
    for args in args_of(instructions, "COPY"):
        *sources, _dest = shlex.split(args)
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert any(source == a or source.startswith(a + "/") for a in allowed), f"{source} is .dockerignored"


def test_sidecar_image_installs_the_project_and_every_extra_with_pip() -> None:
    copied = {s.rstrip("/").removeprefix("./") for a in args_of(SIDECAR, "COPY") for s in shlex.split(a)[:-1]}
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert {"pyproject.toml", PYPROJECT["project"]["readme"], "constraints.txt", *packages} <= copied
    # the project with every optional part: the image serves any configuration (PostgreSQL, Langfuse, OTLP
    # sink), at the versions of the lock file (make lock), so a rebuild installs the same
    assert any(
        re.search(r"\bpip install -c constraints\.txt '\.\[all\]'(\s|$)", run) for run in args_of(SIDECAR, "RUN")
    )


def test_sidecar_image_listens_on_every_interface_at_the_default_port() -> None:
    assert args_of(SIDECAR, "EXPOSE") == [f"{PORT} 4317"]  # OTLP/HTTP (and health), OTLP/gRPC
    assert_address(env_instructions(SIDECAR)["TRACING_EVAL_HTTP__ADDRESS"])
    assert env_instructions(SIDECAR)["TRACING_EVAL_RECEIVER__GRPC_ADDRESS"] == "0.0.0.0:4317"
    for name in env_instructions(SIDECAR):
        assert not name.startswith(ENV_PREFIX) or settings_env_ok(name), name


def test_sidecar_entrypoint_is_the_console_script_running_run_with_the_config_file(tmp_path: Path) -> None:
    (entrypoint,) = args_of(SIDECAR, "ENTRYPOINT")
    argv = exec_form(entrypoint)
    assert argv[0] == console_script() and argv[1] == "run"
    check_run_args(argv[1:])
    assert argv[argv.index("--config") + 1] == CONFIG_PATH
    assert not args_of(SIDECAR, "CMD"), "a CMD would be replaced by `docker run IMAGE ARGS`; keep flags in ENTRYPOINT"
    # the image ships a config at that path, which loads and keeps the store in the state directory
    (shipped,) = [shlex.split(a)[0] for a in args_of(SIDECAR, "COPY") if shlex.split(a)[-1] == CONFIG_PATH]
    settings = load_settings(REPO / shipped)
    db = PurePosixPath(settings.store.url.removeprefix("sqlite+aiosqlite:///"))
    assert db.is_absolute(), "an absolute store path: `docker exec ... tracing-eval results` runs from any folder"
    assert any(f"-o 10001 -g 10001 -m 0750 {db.parent}" in run for run in args_of(SIDECAR, "RUN"))


def test_sidecar_healthcheck_asks_healthz_and_works(monkeypatch: pytest.MonkeyPatch) -> None:
    (healthcheck,) = args_of(SIDECAR, "HEALTHCHECK")
    options, _, command = healthcheck.partition("CMD ")
    assert re.search(r"--interval=\d+s", options) and re.search(r"--timeout=\d+s", options)
    argv = exec_form(command)
    assert argv[0] == "python" and "/healthz" in argv[-1] and "/healthz" in served_paths()
    # run the very command against the sidecar's HTTP app, as Docker would inside the container
    with LoopbackServer(server.http_app()) as loopback:
        env = {**os.environ, "TRACING_EVAL_HTTP__ADDRESS": f"0.0.0.0:{loopback.port}"}
        ok = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, timeout=30)
        assert ok.returncode == 0, ok.stderr.decode()
    down = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, timeout=30)
    assert down.returncode == 1, "a refused connection must fail the check (exit 1)"


# -- the example app -----------------------------------------------------------------------------


def test_example_app_entrypoint_runs_its_script() -> None:
    (entrypoint,) = args_of(APP, "ENTRYPOINT")
    argv = exec_form(entrypoint)
    assert argv[0] == "python"
    (workdir,) = args_of(APP, "WORKDIR")
    destinations = {PurePosixPath(workdir, shlex.split(a)[-1]) for a in args_of(APP, "COPY")}
    assert PurePosixPath(workdir, argv[1]) in destinations


def _image_layout(root: Path) -> Path:
    """The example app's files where its Dockerfile puts them (WORKDIR = root)."""
    for args in args_of(APP, "COPY"):
        *sources, dest = shlex.split(args)
        for source in sources:
            target = root / dest
            if dest.endswith("/") or len(sources) > 1:
                target = target / Path(source).name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / source, target)
    return root / exec_form(args_of(APP, "ENTRYPOINT")[0])[1]


def test_example_app_exports_genai_conversations_with_only_the_files_its_image_has(tmp_path: Path) -> None:
    """One round of the app, from a copy of the image's file layout, against a capture endpoint."""
    bodies: list[tuple[str, str, bytes]] = []

    async def capture(request: Request) -> Response:
        body = decompress(await request.body(), request.headers.get("content-encoding"), 1 << 26)
        bodies.append((request.url.path, media_type(request.headers.get("content-type")), body))
        return Response(b"", media_type="application/x-protobuf")

    app = Starlette(routes=[Route("/v1/{signal}", capture, methods=["POST"])])
    script = _image_layout(tmp_path / "app")
    with LoopbackServer(app) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
        env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": server.url, "APP_ROUNDS": "1", "APP_PAUSE_SECONDS": "0"}
        done = subprocess.run(
            [sys.executable, "-I", str(script)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr
    spans = [s for path, mt, body in bodies if path == "/v1/traces" for s in decode_traces(body, mt).spans]
    conversations = set(conversation_ids(spans).values())
    assert len(conversations) == 7 and all(c.startswith("demo-") for c in conversations)
    assert any(s.name == "invoke_agent support-bot" for s in spans)
    assert any("gen_ai.input.messages" in s.attributes for s in spans), "content capture is on"
    assert any(path == "/v1/logs" for path, _, _ in bodies)


# -- compose -------------------------------------------------------------------------------------

COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def interpolate(value: str) -> str:
    """Compose's `${VAR:-default}` with nothing set: the default."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", value)


def environment(service: dict[str, Any]) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {k: None if v is None else interpolate(str(v)) for k, v in env.items()}


def test_compose_runs_the_langfuse_v4_stack_with_the_reference_images() -> None:
    assert {*LANGFUSE_IMAGES, "app", "tracing-eval"} <= set(SERVICES)
    for name, image in LANGFUSE_IMAGES.items():
        assert SERVICES[name]["image"].removeprefix("docker.io/") == image, name


def test_compose_langfuse_environment_is_complete_and_consistent() -> None:
    web, work = environment(SERVICES["langfuse-web"]), environment(SERVICES["langfuse-worker"])
    for env in (web, work):
        assert env.keys() >= LANGFUSE_ENV, LANGFUSE_ENV - env.keys()
        assert re.fullmatch(r"[0-9a-f]{64}", env["ENCRYPTION_KEY"] or "")
        for key in ("DATABASE_URL", "CLICKHOUSE_URL", "CLICKHOUSE_MIGRATION_URL", "LANGFUSE_S3_EVENT_UPLOAD_ENDPOINT"):
            assert urlsplit(env[key]).hostname in SERVICES, f"{key}: no service {urlsplit(env[key]).hostname}"
        assert env["REDIS_HOST"] in SERVICES
        db = urlsplit(env["DATABASE_URL"])
        postgres = environment(SERVICES["postgres"])
        assert (db.username, db.password) == (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"])
        clickhouse = environment(SERVICES["clickhouse"])
        assert (env["CLICKHOUSE_USER"], env["CLICKHOUSE_PASSWORD"]) == (
            clickhouse["CLICKHOUSE_USER"],
            clickhouse["CLICKHOUSE_PASSWORD"],
        )
        minio = environment(SERVICES["minio"])
        assert env["LANGFUSE_S3_EVENT_UPLOAD_ACCESS_KEY_ID"] == minio["MINIO_ROOT_USER"]
        assert env["LANGFUSE_S3_EVENT_UPLOAD_SECRET_ACCESS_KEY"] == minio["MINIO_ROOT_PASSWORD"]
        assert f"--requirepass {env['REDIS_AUTH']}" in SERVICES["redis"]["command"]
    assert web.keys() >= {"NEXTAUTH_SECRET", "LANGFUSE_INIT_PROJECT_PUBLIC_KEY", "LANGFUSE_INIT_PROJECT_SECRET_KEY"}
    for name, service in SERVICES.items():
        for dependency in service.get("depends_on") or {}:
            assert dependency in SERVICES, f"{name} depends on a missing service {dependency}"
        for volume in service.get("volumes") or []:
            source = volume.split(":")[0]
            if not source.startswith((".", "/")):
                assert source in COMPOSE["volumes"], f"{name}: volume {source} is not declared"


def _build(service: dict[str, Any]) -> Path:
    context = (DEPLOY / service["build"]["context"]).resolve()
    assert context == REPO, "the Dockerfiles copy from the repository root"
    dockerfile_path = context / service["build"]["dockerfile"]
    assert dockerfile_path.is_file()
    return dockerfile_path


def test_compose_sidecar_uses_the_image_config_keys_and_port(tmp_path: Path) -> None:
    service = SERVICES["tracing-eval"]
    assert _build(service) == DEPLOY / "Dockerfile"
    assert "user" not in service or str(service["user"]).split(":")[0] not in ("0", "root")
    if "command" in service:
        check_run_args(["run", *service["command"]])
    mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
    config = (DEPLOY / mounts[CONFIG_PATH]).resolve()
    settings = load_settings(config)
    assert settings.sources.langfuse, "the compose sidecar reads the app's conversations from Langfuse"
    db = PurePosixPath(settings.store.url.removeprefix("sqlite+aiosqlite:///"))
    assert any(db.is_relative_to(target) for target in mounts if not mounts[target].startswith(".")), (
        "the store lives on the named volume"
    )
    env = environment(service)
    for name in env:
        assert not name.startswith(ENV_PREFIX) or settings_env_ok(name), name
    web = environment(SERVICES["langfuse-web"])
    assert env["LANGFUSE_PUBLIC_KEY"] == web["LANGFUSE_INIT_PROJECT_PUBLIC_KEY"]
    assert env["LANGFUSE_SECRET_KEY"] == web["LANGFUSE_INIT_PROJECT_SECRET_KEY"]
    url = urlsplit(env["LANGFUSE_BASE_URL"] or "")
    web_ports = {str(p).rsplit(":", 1)[-1] for p in SERVICES["langfuse-web"]["ports"]}
    assert url.hostname == "langfuse-web" and str(url.port) in web_ports
    assert SECRET_ENV <= env.keys()
    assert env["OPENAI_API_KEY"] is None, "the judge key is passed through from the shell, never written here"
    container_ports = {int(str(p).rsplit(":", 1)[-1]) for p in service["ports"]}
    assert container_ports == {PORT}


def test_compose_app_sends_its_spans_to_langfuse_with_the_project_keys() -> None:
    service = SERVICES["app"]
    assert _build(service) == APP_DOCKERFILE
    env = environment(service)
    endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] or "")
    assert (endpoint.hostname, endpoint.port, endpoint.path) == ("langfuse-web", 3000, "/api/public/otel/v1/traces")
    headers = dict(h.split("=", 1) for h in (env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] or "").split(","))
    scheme, _, token = unquote(headers["Authorization"]).partition(" ")
    web = environment(SERVICES["langfuse-web"])
    assert scheme == "Basic"
    assert base64.b64decode(token).decode() == (
        f"{web['LANGFUSE_INIT_PROJECT_PUBLIC_KEY']}:{web['LANGFUSE_INIT_PROJECT_SECRET_KEY']}"
    )
    assert env["OTEL_LOGS_EXPORTER"] == "none", "Langfuse has no OTLP logs endpoint"
    # the documented switch to OTLP mode points at the sidecar's receiver
    switch = re.search(r"APP_TRACES_ENDPOINT=(\S+)", (DEPLOY / "compose.yaml").read_text())
    assert switch and urlsplit(switch[1]).hostname == "tracing-eval" and urlsplit(switch[1]).port == PORT
    assert urlsplit(switch[1]).path == "/v1/traces" and "/v1/traces" in {r for r in served_paths_with_receiver()}
    assert service["depends_on"]["tracing-eval"]["condition"] == "service_healthy"
    assert args_of(SIDECAR, "HEALTHCHECK"), "service_healthy needs the image's HEALTHCHECK"


def served_paths_with_receiver() -> set[str]:
    from tracing_eval.config import ReceiverSettings
    from tracing_eval.connectors.otlp.receiver import OtlpReceiver

    receiver = OtlpReceiver(SimpleNamespace(), ReceiverSettings())  # type: ignore[arg-type]
    return {route.path for route in server.http_app(receiver.routes(), SimpleNamespace()).routes}


# -- Kubernetes ----------------------------------------------------------------------------------

K8S = yaml_docs(DEPLOY / "kubernetes" / "sidecar.yaml")


def k8s(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in K8S if d["kind"] == kind]
    return doc


POD = k8s("Deployment")["spec"]["template"]
CONTAINERS = {c["name"]: c for c in POD["spec"]["containers"]}


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return number


def test_pod_runs_the_app_and_the_sidecar_together() -> None:
    assert set(CONTAINERS) == {"app", "tracing-eval"}
    deployment = k8s("Deployment")
    assert deployment["spec"]["selector"]["matchLabels"].items() <= POD["metadata"]["labels"].items()
    app = {e["name"]: e.get("value") for e in CONTAINERS["app"]["env"]}
    endpoint = urlsplit(app["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname in ("127.0.0.1", "localhost") and endpoint.port == PORT


def test_sidecar_port_probes_and_metrics_match_the_server() -> None:
    sidecar = CONTAINERS["tracing-eval"]
    assert [p["containerPort"] for p in sidecar["ports"]] == [PORT, 4317]  # OTLP/HTTP and health; OTLP/gRPC
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["TRACING_EVAL_RECEIVER__GRPC_ADDRESS"] == "0.0.0.0:4317"
    live, ready = sidecar["livenessProbe"]["httpGet"], sidecar["readinessProbe"]["httpGet"]
    assert (live["path"], ready["path"]) == ("/healthz", "/readyz")
    assert port_number(sidecar, live["port"]) == port_number(sidecar, ready["port"]) == PORT
    annotations = POD["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == PORT
    assert {live["path"], ready["path"], annotations["prometheus.io/path"]} <= served_paths()
    assert sidecar["readinessProbe"]["timeoutSeconds"] > worker.STORE_TIMEOUT_SECONDS, (
        "/readyz may wait that long for the store"
    )
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert_address(env["TRACING_EVAL_HTTP__ADDRESS"])


def test_sidecar_command_env_and_secret(tmp_path: Path) -> None:
    sidecar = CONTAINERS["tracing-eval"]
    (entrypoint,) = args_of(SIDECAR, "ENTRYPOINT")
    argv = sidecar.get("command") or exec_form(entrypoint)
    assert argv[0] == console_script()
    check_run_args([*argv[1:], *sidecar.get("args", [])])
    for container in CONTAINERS.values():
        for item in container.get("env", []):
            name = item["name"]
            assert not name.startswith(ENV_PREFIX) or settings_env_ok(name), name
    secret = k8s("Secret")
    (source,) = sidecar["envFrom"]
    assert source["secretRef"]["name"] == secret["metadata"]["name"]
    keys = set(secret.get("stringData") or secret.get("data") or {})
    assert SECRET_ENV <= keys
    assert all(k in OTHER_ENV or settings_env_ok(k) for k in keys), keys


def test_configmap_toml_loads_and_is_mounted_at_the_config_path(tmp_path: Path) -> None:
    configmap = k8s("ConfigMap")
    sidecar = CONTAINERS["tracing-eval"]
    volumes = {v["name"]: v for v in POD["spec"]["volumes"]}
    (mount,) = [m for m in sidecar["volumeMounts"] if "configMap" in volumes[m["name"]]]  # the one ConfigMap volume
    volume = volumes[mount["name"]]["configMap"]
    assert volume["name"] == configmap["metadata"]["name"]
    files = {item["path"]: item["key"] for item in volume.get("items", [])} or {k: k for k in configmap["data"]}
    config = PurePosixPath(CONFIG_PATH)
    assert mount["mountPath"] == str(config.parent) and mount.get("readOnly") is True
    settings = load_toml_text(configmap["data"][files[config.name]], tmp_path)
    assert settings.sources.otlp_http, "the app in the Pod exports OTLP to the sidecar"
    # the SQLite file is on a writable volume (the root filesystem is read-only)
    db = PurePosixPath(settings.store.url.removeprefix("sqlite+aiosqlite:///"))
    writable = [m["mountPath"] for m in sidecar["volumeMounts"] if not m.get("readOnly")]
    assert any(db.is_relative_to(path) for path in writable)


def test_every_container_is_non_root_and_has_requests_and_limits() -> None:
    pod_security = POD["spec"].get("securityContext", {})
    for name, container in CONTAINERS.items():
        security = {**pod_security, **container.get("securityContext", {})}
        assert security.get("runAsNonRoot") is True, name
        assert security.get("runAsUser", 1) != 0, name
        assert security.get("allowPrivilegeEscalation") is False, name
        assert "ALL" in security.get("capabilities", {}).get("drop", []), name
        resources = container["resources"]
        for level in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources[level]), f"{name}: {level}"


def memory_mib(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_the_sidecar_memory_limit_follows_the_sizing_rule_for_its_receiver_limits(tmp_path: Path) -> None:
    """docs/reliability.md, Sizing: idle worker + 7 x max_inflight_bytes + evaluation + the store's
    memories of recent histories must fit the limit (measured: 102 MiB idle, 6.4 to 6.9 x for the
    smallest spans, about 100 MiB evaluating; the memories are bounded: the last histories to
    `Chains.max_bytes`, the ids of nodes stored lately to about 24 MiB)."""
    configmap = k8s("ConfigMap")
    settings = load_toml_text(next(iter(configmap["data"].values())), tmp_path)
    env = {e["name"]: e.get("value") for e in CONTAINERS["tracing-eval"].get("env", [])}
    assert not {"TRACING_EVAL_RECEIVER__MAX_INFLIGHT_BYTES", "TRACING_EVAL_RECEIVER__MAX_BODY_BYTES"} & env.keys()
    receiver = settings.receiver
    memories = Chains().max_bytes / 2**20 + 24
    needed = 110 + 7 * receiver.max_inflight_bytes / 2**20 + 100 + memories
    limit = memory_mib(CONTAINERS["tracing-eval"]["resources"]["limits"]["memory"])
    assert needed <= limit, (needed, limit)
    assert receiver.max_inflight_bytes == ReceiverSettings().max_inflight_bytes  # the manifest shows the defaults
    assert "7 x max_inflight_bytes" in (DEPLOY / "kubernetes" / "sidecar.yaml").read_text()
    assert "7 × `max_inflight_bytes`" in (DEPLOY.parent / "docs" / "reliability.md").read_text()


# -- systemd -------------------------------------------------------------------------------------

UNIT_PATH = DEPLOY / "systemd" / "tracing-eval.service"
ENV_EXAMPLE = DEPLOY / "systemd" / "tracing-eval.env.example"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, empty_lines_in_values=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(UNIT_PATH.read_text())
    return parser


def test_systemd_unit_runs_the_console_script_as_a_service_user() -> None:
    service = unit()["Service"]
    assert service["User"] not in ("root", "0") and service.get("Group")
    argv = shlex.split(service["ExecStart"])
    assert PurePosixPath(argv[0]).name == console_script()
    assert argv[1] == "run"
    check_run_args(argv[1:])
    assert service["Restart"] in ("on-failure", "always")
    assert service.get("KillSignal", "SIGTERM") == "SIGTERM"
    assert service["WorkingDirectory"] == f"/var/lib/{service['StateDirectory']}"
    assert service.get("NoNewPrivileges") == "yes"
    assert unit()["Install"]["WantedBy"] == "multi-user.target"
    assert unit()["Unit"]["After"] == "network-online.target"


def test_systemd_environment_file_is_the_documented_example() -> None:
    path = unit()["Service"]["EnvironmentFile"].lstrip("-")
    assert PurePosixPath(path).parent == PurePosixPath(CONFIG_PATH).parent
    assert ENV_EXAMPLE.name == PurePosixPath(path).name + ".example"
    names, empty_settings = set(), []
    for line in ENV_EXAMPLE.read_text().splitlines():
        found = re.match(r"^(#?)([A-Z][A-Z0-9_]*)=(.*)$", line.strip())
        if not found:
            assert not line.strip() or line.lstrip().startswith("#"), f"not KEY=value: {line}"
            continue
        commented, name, value = found.groups()
        names.add(name)
        assert name in OTHER_ENV or settings_env_ok(name), f"{ENV_EXAMPLE.name}: unknown variable {name}"
        if name.startswith(ENV_PREFIX) and not commented and not value:
            empty_settings.append(name)
        if name == "TRACING_EVAL_HTTP__ADDRESS":
            HttpSettings(address=value)
    assert SECRET_ENV <= names
    assert not empty_settings, f"an empty TRACING_EVAL_* value is a value, not unset: {empty_settings}"


# -- everything in deploy/ -----------------------------------------------------------------------


def deploy_files() -> list[Path]:
    files = sorted(p for p in DEPLOY.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    expected = {DEPLOY / "Dockerfile", DEPLOY / "compose.yaml", UNIT_PATH, DEPLOY / "kubernetes" / "sidecar.yaml"}
    assert expected <= set(files), "the walk of deploy/ missed files it must check"
    return files


def test_every_settings_variable_in_deploy_is_a_real_key() -> None:
    bad = [
        f"{path.relative_to(REPO)}: {name}"
        for path in deploy_files()
        for name in sorted(set(re.findall(rf"{ENV_PREFIX}[A-Z0-9_]*[A-Z0-9]", path.read_text())))
        if not settings_env_ok(name)
    ]
    assert not bad, bad


def _values_taken(written: dict[str, Any], loaded: dict[str, Any], where: str) -> None:
    """Every key `written` in a TOML file has that value in the `loaded` settings (nested tables alike)."""
    for key, value in written.items():
        assert key in loaded, f"{where}.{key}: not a settings key"
        if isinstance(value, dict):
            _values_taken(value, loaded[key], f"{where}.{key}")
        else:
            assert loaded[key] == value, f"{where}.{key}: written {value!r}, loaded {loaded[key]!r}"


def test_every_toml_in_deploy_loads_with_the_values_it_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)  # the files alone
    paths = sorted(DEPLOY.rglob("*.toml"))
    assert [p.relative_to(DEPLOY).as_posix() for p in paths] == ["compose/tracing-eval.toml", "tracing-eval.toml"]
    for path in paths:
        written = tomllib.loads(path.read_text())
        assert written, f"{path.name} sets nothing"
        _values_taken(written, load_settings(path).model_dump(mode="json"), path.relative_to(REPO).as_posix())


def test_every_tracing_eval_command_in_the_deploy_readme_parses() -> None:
    commands = commands_in_markdown((DEPLOY / "README.md").read_text())
    assert commands
    for words in commands:
        check_cli(words)


def test_the_config_path_is_the_same_everywhere() -> None:
    using = set()
    for path in deploy_files():
        for found in re.findall(r"/etc/tracing-eval/[\w.-]+\.toml", path.read_text()):
            assert found == CONFIG_PATH, f"{path.relative_to(REPO)}: {found}"
            using.add(path.relative_to(DEPLOY).as_posix())
    assert {"Dockerfile", "compose.yaml", "kubernetes/sidecar.yaml"} <= using
