"""Settings: one TOML file, every key overridable as `TRACING_EVAL_<SECTION>__<KEY>`.

Precedence (highest first): explicit overrides from the CLI, environment, the TOML file, defaults.
Unknown keys are errors, so a typo in the file is reported instead of silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pydantic import BaseModel, Field, SecretStr, ValidationError, create_model, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from tracing_eval import registry
from tracing_eval.settings_base import ConfigError, empty_is_unset, host_port
from tracing_eval.settings_base import SettingsSection as _Section

__all__ = ["ConfigError", "Settings", "load_settings"]

ENV_PREFIX = "TRACING_EVAL_"
DEFAULT_CONFIG_FILE = "tracing-eval.toml"


class StoreSettings(_Section):
    url: str = Field(
        "sqlite+aiosqlite:///tracing-eval.db",
        description="SQLAlchemy async URL of the state store (SQLite file by default, in the working folder).",
    )


#: Defaults of the receiver's size limits (docs/reliability.md derives the memory limit from them)
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_INFLIGHT_BYTES = 64 * 1024 * 1024


class ReceiverSettings(_Section):
    max_body_bytes: int = Field(
        MAX_BODY_BYTES, gt=0, description="Largest request body accepted after decompression (413 above)."
    )
    _blank_auth_token = field_validator("auth_token", mode="before")(empty_is_unset)
    auth_token: SecretStr | None = Field(
        None, description="If set, requests must send `Authorization: Bearer <token>`. Set it from the environment."
    )
    write_timeout_seconds: float = Field(
        5.0, gt=0, description="How long a request may wait for the store before it is answered 503 with Retry-After."
    )
    max_concurrent_writes: int = Field(
        4,
        gt=0,
        description="Transactions writing received data at once on PostgreSQL, one request each; more wait up to "
        "write_timeout_seconds. SQLite writes one transaction at a time, and the requests that waited for it "
        "(up to write_timeout_seconds) go into the next one together.",
    )
    retry_after_seconds: int = Field(
        5, gt=0, description="Retry-After sent with 503 (the store cannot keep up) and 429 (the sinks are behind)."
    )
    max_pending_requests: int = Field(
        64,
        gt=0,
        description="Requests in progress at once once their body has arrived (decoding, waiting for or writing to "
        "the store); more are answered 503 with Retry-After. Memory is bounded by max_inflight_bytes.",
    )
    max_outbox_backlog: int = Field(
        100_000,
        ge=0,
        description="When at least this many deliveries (results and review items) wait in the outbox for the "
        "enabled sinks (read from the store at most once a second), requests are answered 429 with Retry-After "
        "before their body is read, until the sinks catch up; 0: never.",
    )
    max_inflight_bytes: int = Field(
        MAX_INFLIGHT_BYTES,
        gt=0,
        description="Memory budget of the receivers: bytes of request bodies held at once, as read and as "
        "decompressed, over all requests. A request that would pass it is answered 503 with Retry-After. Peak "
        "memory is at most about the idle worker plus 7 times this (docs/reliability.md, Sizing); at least "
        "twice max_body_bytes.",
    )
    body_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a request body may take to arrive; a slower one is answered 408 and holds nothing.",
    )
    grpc_address: str | None = Field(
        "127.0.0.1:4317",
        description="HOST:PORT of the OTLP/gRPC receiver, served next to OTLP/HTTP whenever the receiver is on; "
        "empty: no gRPC. If the default address is taken, gRPC stays off with a warning; an address set "
        "explicitly must be free.",
    )

    @field_validator("grpc_address")
    @classmethod
    def _grpchost_port(cls, v: str | None) -> str | None:
        return None if v is None or not v.strip() else host_port(v.strip())

    @model_validator(mode="after")
    def _budget_holds_a_request(self) -> ReceiverSettings:
        if self.max_inflight_bytes < 2 * self.max_body_bytes:
            raise ValueError(
                f"max_inflight_bytes ({self.max_inflight_bytes}) must be at least twice max_body_bytes "
                f"({self.max_body_bytes}): a compressed request of the largest size holds its body and what "
                "it inflates to at once, and must fit"
            )
        return self


class ScheduleSettings(_Section):
    tick_seconds: float = Field(
        10.0,
        gt=0,
        description="Interval between ticks (pull, claim, evaluate, record) and between delivery rounds, "
        "which run side by side.",
    )
    turn_settle_seconds: float = Field(
        60.0, ge=0, description="A turn is ready once its trace has had no new span for this long."
    )
    thread_idle_seconds: float = Field(
        300.0, ge=0, description="A thread is ready once it has had no new turn for this long."
    )
    lease_seconds: float = Field(300.0, gt=0, description="How long a claimed thread stays leased to one worker.")
    batch_size: int = Field(50, gt=0, description="Threads claimed per tick.")
    max_attempts: int = Field(5, gt=0, description="Evaluation attempts per thread version before it is marked failed.")
    drain_seconds: float = Field(
        30.0,
        gt=0,
        description="On SIGTERM: time to finish the current tick and flush the outbox before leases are given back.",
    )


class RetentionSettings(_Section):
    enabled: bool = Field(
        True, description="Delete old data on a schedule of its own (off: the store keeps everything)."
    )
    spans_days: float = Field(
        7.0,
        gt=0,
        description="Spans, log events and stored histories of a thread evaluated at its last version (or not "
        "sampled) are deleted once it has been idle this long (at least one hour); its turns stay as a compact "
        "transcript, so a thread that grows later is evaluated whole.",
    )
    results_days: float = Field(
        90.0,
        gt=0,
        description="Everything of a thread (results, review items, turns) is deleted once it has been idle this "
        "long; also the judge's cached answers older than spans_days and parked outbox rows older than this.",
    )
    outbox_days: float = Field(7.0, gt=0, description="Delivered outbox rows are deleted this long after delivery.")
    review_days: float = Field(
        30.0, gt=0, description="Resolved, superseded and forwarded review items are deleted after this long."
    )
    interval_seconds: float = Field(
        600.0, gt=0, description="How often retention runs; each run deletes in small transactions, never for long."
    )

    @model_validator(mode="after")
    def _results_outlive_spans(self) -> RetentionSettings:
        if self.results_days < self.spans_days:
            raise ValueError(
                f"results_days ({self.results_days:g}) must be at least spans_days ({self.spans_days:g}): results "
                "are what is kept of a thread after its spans go"
            )
        return self


DETERMINISTIC_PACK = [
    "repetition",
    "reask",
    "refusal_loop",
    "tool_errors",
    "user_friction",
    "response_hygiene",
    "thread_stats",
]
#: Metrics that a "*" in review routing does not watch: on human labels their verdicts are not precise
#: enough to send a thread to review on their own (docs/metrics.md). Named in `metrics`, they route.
ADVISORY_METRICS = ["user_friction"]
JUDGED_PACK = [
    "repetitive_pattern",
    "task_success",
    "failure_rate",
    "conversational_flow",
    "completeness",
    "knowledge_retention",
    "role_adherence",
    "turn_relevancy",
    "tool_error_handling",
]


class CriterionSettings(_Section):
    name: str = Field(description="Metric name becomes `criterion:<name>`.", pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["geval", "critic"] = Field(
        "geval", description="`geval`: a 0-10 score; `critic`: a yes/no aspect critic."
    )
    definition: str = Field(description="What the judge checks, in plain words.")
    threshold: float | None = Field(None, ge=0, le=1, description="Pass threshold (default 0.7; critics pass on yes).")


class MetricsSettings(_Section):
    enabled: list[str] = Field(
        default_factory=lambda: [*DETERMINISTIC_PACK, *JUDGED_PACK],
        description="Metrics to run, by name. Judged metrics run only when a judge is configured.",
    )
    options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Options by metric name, e.g. task_success: task_description, success_criteria, temperature; "
        "role_adherence: role; turn_relevancy: window, system_prompt.",
    )
    criteria: list[CriterionSettings] = Field(default_factory=list, description="Custom judged criteria.")
    thresholds: dict[str, float] = Field(
        default_factory=dict,
        description="Pass thresholds by metric name (default 0.7 unless the metric says otherwise).",
    )

    @field_validator("thresholds")
    @classmethod
    def _in_unit_range(cls, v: dict[str, float]) -> dict[str, float]:
        for name, t in v.items():
            if not 0.0 <= t <= 1.0:
                raise ValueError(f"threshold for {name!r} must be within [0, 1], got {t}")
        return v


class JudgeSettings(_Section):
    model: str | None = Field(
        None, description="Judge model; the judge tier is on when a model and an API key are set."
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default: OPENAI_BASE_URL, else OpenAI.")
    _blank_api_key = field_validator("api_key", mode="before")(empty_is_unset)
    api_key: SecretStr | None = Field(
        None, description="API key; default: OPENAI_API_KEY. Set it from the environment."
    )
    structured_output: Literal["json_schema", "json_object"] = Field(
        "json_schema", description="`json_object` for endpoints without JSON-schema support."
    )
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature of judge calls.")
    seed: int = Field(42, description="Seed sent with every judge call.")
    timeout_seconds: float = Field(60.0, gt=0, description="Timeout of one judge call.")
    max_retries: int = Field(3, ge=0, description="Retries of one call on 429, 5xx and timeouts.")
    max_concurrency: int = Field(8, gt=0, description="Judge calls in flight at most; halved on 429, regrown slowly.")
    cache: bool = Field(True, description="Reuse answers to identical requests (stored in the state store).")
    input_price_per_mtok: float = Field(0.0, ge=0, description="USD per million input tokens, for cost figures.")
    cached_input_price_per_mtok: float = Field(0.0, ge=0, description="USD per million cached input tokens.")
    output_price_per_mtok: float = Field(0.0, ge=0, description="USD per million output tokens.")
    max_tokens_per_thread: int | None = Field(None, gt=0, description="Token budget of one thread evaluation.")
    max_tokens_per_hour: int | None = Field(None, gt=0, description="Token budget per hour for the whole worker.")
    context_tokens: int = Field(
        128_000,
        ge=4_096,
        description="Context window of the judge model in tokens (input and answer); a request that would not fit "
        "is not sent, and the metric says so.",
    )
    max_transcript_tokens: int | None = Field(
        None,
        gt=0,
        description="Token budget of the transcript in one request; default: context_tokens minus 32,000, at least "
        "half of it (96,000 for 128k). Over it, long contents keep head and tail and middle turns are left out, "
        "always with a marker the judge reads as unknown.",
    )
    batch_thread_metrics: bool = Field(
        True,
        description="Ask the thread metrics that read the same transcript in one call: one request and one answer "
        "with a part per metric (about half the input tokens of one call each).",
    )

    @field_validator("max_transcript_tokens")
    @classmethod
    def _below_context(cls, v: int | None, info: Any) -> int | None:
        context = info.data.get("context_tokens")
        if v is not None and context is not None and v >= context:
            raise ValueError(
                f"must be below judge.context_tokens ({context}), to leave room for instructions and answer"
            )
        return v

    @property
    def transcript_budget(self) -> int:
        """Tokens one transcript may take: `max_transcript_tokens`, else the default from the context."""
        if self.max_transcript_tokens is not None:
            return self.max_transcript_tokens
        return max(self.context_tokens // 2, self.context_tokens - 32_000)

    def resolved_api_key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key else os.environ.get("OPENAI_API_KEY") or None

    def resolved_base_url(self) -> str | None:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or None

    @property
    def enabled(self) -> bool:
        return bool(self.model and self.resolved_api_key())


class RouteSettings(_Section):
    name: str = Field(description="Name of the route, shown with every item it routes.")
    metrics: list[str] = Field(default_factory=lambda: ["*"], description="Metrics the route watches ('*' = all).")
    below: float | None = Field(
        None, ge=0, le=1, description="Route when a score is below this (default: when the metric fails its threshold)."
    )
    labels: list[str] = Field(default_factory=list, description="Labels that route even when the score passes.")
    include_errors: bool = Field(False, description="Also route results with status error.")
    destinations: list[str] = Field(
        default_factory=lambda: ["local"], description="Where matching threads go: local, webhook, langfuse."
    )
    priority: Literal["low", "normal", "high", "urgent"] = Field("normal", description="Priority of the routed item.")


class ReviewSettings(_Section):
    enabled: bool = Field(True, description="Route failing threads to the review queue.")
    metrics: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Metrics whose failure routes a thread ('*' = all but the `advisory` ones).",
    )
    advisory: list[str] = Field(
        default_factory=lambda: list(ADVISORY_METRICS),
        description="Metrics that '*' does not watch, in every rule: not precise enough on human labels to route a "
        "thread on their own (docs/metrics.md). Their results are still written; a rule that names one routes on it.",
    )
    labels: list[str] = Field(
        default_factory=list,
        description="Labels that route a thread even when the score passes, e.g. 'partial' (repetition at the threshold).",
    )
    include_errors: bool = Field(False, description="Also route threads where a metric ended with status error.")
    routes: list[RouteSettings] = Field(
        default_factory=list,
        description="Routing rules; when empty, one rule from metrics/labels/include_errors sends failing "
        "threads to the local queue and every review sink that is enabled.",
    )


class SourceSettings(_Section):
    otlp_http: bool = Field(True, description="Serve the OTLP/HTTP receiver (/v1/traces, /v1/logs) in `run`.")
    langfuse: bool = Field(False, description="Pull traces from Langfuse (see [langfuse]); scores go back there.")
    otlp_files: list[Path] = Field(
        default_factory=list, description="OTLP JSON-lines files (Collector file exporter format) to read."
    )
    enabled: list[str] = Field(
        default_factory=list,
        description="More sources, as `run --source` takes them: `NAME` or `NAME:ARGUMENT`, e.g. a source another "
        "package registers (docs/extending.md).",
    )

    def specs(self) -> list[str]:
        """The configured sources as `--source` specs."""
        return [
            *(["otlp-http"] if self.otlp_http else []),
            *(f"otlp-file:{p}" for p in self.otlp_files),
            *(["langfuse"] if self.langfuse else []),
            *self.enabled,
        ]


class SinkSettings(_Section):
    enabled: list[str] = Field(
        default_factory=lambda: ["local"],
        description="Result sinks: local (always on), otlp, webhook, langfuse, or one another package registers "
        "(docs/extending.md).",
    )
    max_attempts: int = Field(10, gt=0, description="Delivery attempts per outbox row before it is parked as failed.")
    batch_size: int = Field(
        500,
        gt=0,
        description="Outbox rows a sink that takes batches (otlp, langfuse) gets in one delivery, marked done in "
        "one commit: the OTLP sink exports them in one request, the Langfuse sink writes 20 scores per request "
        "and routes review items one by one after them. Sinks that take rows one by one (webhook) take 10 at a time.",
    )
    lease_seconds: float = Field(
        300.0,
        gt=0,
        description="PostgreSQL: how long an outbox row taken by one replica stays hidden from the others; "
        "renewed just before the row's delivery. Keep it above the longest one delivery can take (a sink's "
        "timeout times its retries, plus their waits); rows of a replica that dies go out after it.",
    )


class HttpSettings(_Section):
    address: str = Field(
        "127.0.0.1:4318", description="HOST:PORT of the HTTP server (/healthz, /readyz, /metrics, OTLP receiver)."
    )
    sink_failure_threshold_seconds: float = Field(
        300.0,
        ge=0,
        description="/readyz answers 503 once a sink has failed every delivery for longer than this; 0: never.",
    )

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        return host_port(v)

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])


class SamplingSettings(_Section):
    rate: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Share of threads evaluated; decided by a hash of the thread key, the same on every replica.",
    )


class LoggingSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    format: Literal["console", "json"] = Field("console", description="`json` for machines, `console` for people.")


M = TypeVar("M", bound=BaseModel)
#: The registered sections by model, for `Settings.section`
_SECTION_PATHS: dict[type[BaseModel], str] = {}


class _Settings(BaseSettings):
    """All settings. See `config.example.toml` for every key with its default."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    store: StoreSettings = Field(default_factory=StoreSettings)
    receiver: ReceiverSettings = Field(default_factory=ReceiverSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    sources: SourceSettings = Field(default_factory=SourceSettings)
    sinks: SinkSettings = Field(default_factory=SinkSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    def section(self, model: type[M]) -> M:
        """The section a source or sink registered with `model` (see `tracing_eval.registry`)."""
        path = _SECTION_PATHS.get(model)
        if path is None:
            raise ConfigError(f"{model.__name__} is not the settings section of a registered source or sink")
        value: object = self
        for part in path.split("."):
            value = getattr(value, part)
        assert isinstance(value, model)
        return value


def _with_sections(base: type[BaseModel], sections: dict[str, type[BaseModel]]) -> type[BaseModel]:
    """`base` with the sections added at their paths (`langfuse`; `sinks.webhook` inside `[sinks]`)."""
    nested: dict[str, dict[str, type[BaseModel]]] = {}
    fields: dict[str, Any] = {}
    for path, model in sections.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = model
        elif head in base.model_fields:
            raise registry.RegistryError(f"settings section [{path}] of a source or sink: [{head}] exists already")
        else:
            fields[head] = (model, Field(default_factory=model))
    for head, inner in nested.items():
        info = base.model_fields.get(head)
        outer = info.annotation if info is not None else None
        if info is None or not isinstance(outer, type) or not issubclass(outer, BaseModel):
            raise registry.RegistryError(
                f"settings sections {sorted(inner)} of a source or sink: [{head}] is no section"
            )
        grown = _with_sections(outer, inner)
        fields[head] = (grown, Field(default_factory=grown, description=info.description))
    return create_model(base.__name__, __base__=base, __module__=base.__module__, __doc__=base.__doc__, **fields)


if TYPE_CHECKING:
    Settings = _Settings
else:  # the engine's sections and those the registered sources and sinks add, in one model
    _SECTION_PATHS.update({model: path for path, model in registry.sections().items()})
    Settings = _with_sections(_Settings, registry.sections())
    Settings.__name__ = Settings.__qualname__ = "Settings"


def _describe(exc: ValidationError, origin: str) -> str:
    lines = [f"invalid configuration ({origin}):"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        env = ENV_PREFIX + "__".join(str(p) for p in err["loc"]).upper()
        msg = "unknown key (check the spelling)" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(
            f"  {loc}: {msg} (TOML key [{'.'.join(str(p) for p in err['loc'][:-1]) or '-'}] {err['loc'][-1]}, env {env})"
        )
    return "\n".join(lines)


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Load settings from `path` (or ./tracing-eval.toml if present), env, and overrides."""
    if path is None and Path(DEFAULT_CONFIG_FILE).is_file():
        path = Path(DEFAULT_CONFIG_FILE)
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    unknown = sorted(
        name
        for name in os.environ
        if name.startswith(ENV_PREFIX) and name[len(ENV_PREFIX) :].split("__")[0].lower() not in Settings.model_fields
    )
    if unknown:
        sections = ", ".join(f"{ENV_PREFIX}{k.upper()}__..." for k in Settings.model_fields)
        raise ConfigError(f"unknown setting(s) in the environment: {', '.join(unknown)}; known sections: {sections}")
    cls = Settings
    if path is not None:  # a subclass that reads this file; Settings itself reads none
        cls = cast(
            type[Settings],
            type("Settings", (Settings,), {"model_config": {**Settings.model_config, "toml_file": path}}),
        )
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(path) if path else "environment")) from None
    except SettingsError as exc:  # a value in the environment that is not the JSON its key needs
        cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
        raise ConfigError(
            f"invalid configuration (environment): {exc}{cause}. Lists and tables in the environment are JSON, "
            f"e.g. {ENV_PREFIX}SINKS__WEBHOOK__URLS='[\"https://example.com/hook\"]'"
        ) from None
