"""Score configs: one per metric, created on first use and referenced by `configId`.

Verdict metrics whose score is a fixed, one-to-one function of the label get a CATEGORICAL
config (label -> score, e.g. RepetitivePatternDetection's V5- scale); every other metric a NUMERIC
config over [0, 1]. Langfuse needs distinct category values, so a scale that gives several labels
the same score (FailureRate's FR6: three labels at 1.0) stays NUMERIC, its label in `metadata`. Config
names are the metric names (Langfuse allows 35 characters; longer names are shortened with a
hash). Replicas racing to create the same config settle on the oldest one of that name.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from tracing_eval.connectors.langfuse.client import LangfuseClient
from tracing_eval.metrics.deterministic import refusal_loop, repetition
from tracing_eval.metrics.judged.base import FR6, V5_MINUS

log = structlog.get_logger(__name__)

MAX_NAME = 35
_UNSAFE = re.compile(r"[^A-Za-z0-9_ .()-]")  # config names: letters, digits, `_ .()-`
#: Metrics whose score is `scale[label]`; CATEGORICAL scores (the label) when the values are distinct.
VERDICT_SCALES: dict[str, Mapping[str, float]] = {
    "repetition": repetition.WEIGHTS,
    "refusal_loop": refusal_loop.WEIGHTS,
    "repetitive_pattern": V5_MINUS,
    "failure_rate": FR6,
}
#: The reviewer's own verdict on a routed thread (a dimension of the annotation queue).
REVIEW_CONFIG = "tracing-eval verdict"
REVIEW_SCALE: Mapping[str, float] = {"confirmed": 0.0, "false_alarm": 1.0}


def score_name(metric: str) -> str:
    """The metric name as a config name: characters Langfuse refuses become `.`, and names over
    35 characters are shortened with a stable hash suffix."""
    name = _UNSAFE.sub(".", metric)
    if len(name) <= MAX_NAME:
        return name
    return name[: MAX_NAME - 9] + "-" + hashlib.sha256(metric.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class ConfigRef:
    id: str
    name: str
    data_type: str  # NUMERIC | CATEGORICAL


def config_body(name: str, scale: Mapping[str, float] | None, description: str) -> dict[str, Any]:
    """The `POST /score-configs` body: categorical over a scale, else numeric in [0, 1]."""
    if scale is not None:
        categories = [{"label": label, "value": float(value)} for label, value in scale.items()]
        return {"name": name, "dataType": "CATEGORICAL", "categories": categories, "description": description}
    return {"name": name, "dataType": "NUMERIC", "minValue": 0.0, "maxValue": 1.0, "description": description}


def _fits(config: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    """An existing config can carry our scores: same type, live, and (categorical) every label known."""
    if config.get("isArchived") or config.get("dataType") != body["dataType"]:
        return False
    if body["dataType"] == "CATEGORICAL":
        known = {c.get("label"): c.get("value") for c in config.get("categories") or []}
        return all(known.get(c["label"]) == c["value"] for c in body["categories"])
    low, high = config.get("minValue"), config.get("maxValue")
    return (low is None or low <= 0.0) and (high is None or high >= 1.0)


class ScoreConfigs:
    """Config ids by score name, looked up or created once per process."""

    def __init__(self, client: LangfuseClient, scales: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.client = client
        self.scales = dict(VERDICT_SCALES if scales is None else scales)
        self._cache: dict[str, ConfigRef | None] = {}
        self._lock = asyncio.Lock()
        self._listing: list[dict[str, Any]] | None = None

    def scale(self, metric: str) -> Mapping[str, float] | None:
        """The categories of a metric's scores, or None for numeric scores."""
        scale = self.scales.get(metric)
        return scale if scale is not None and len(set(scale.values())) == len(scale) else None

    async def for_metric(self, metric: str) -> ConfigRef | None:
        """The config of a metric's scores (None when a conflicting config of that name exists)."""
        scale = self.scale(metric)
        kind = "verdict" if scale else "score in [0, 1], higher is better"
        return await self.ensure(config_body(score_name(metric), scale, f"tracing-eval metric {metric} ({kind})"))

    async def review(self) -> ConfigRef | None:
        body = config_body(REVIEW_CONFIG, REVIEW_SCALE, "Reviewer's verdict on a thread tracing-eval flagged")
        return await self.ensure(body)

    async def ensure(self, body: dict[str, Any]) -> ConfigRef | None:
        name = body["name"]
        if name in self._cache:
            return self._cache[name]
        async with self._lock:
            if name not in self._cache:
                self._cache[name] = await self._find_or_create(body)
        return self._cache[name]

    async def _find_or_create(self, body: dict[str, Any]) -> ConfigRef | None:
        if self._listing is None:
            self._listing = await self.client.score_configs()
        found = _oldest(self._listing, body)
        if found is not None:
            return found
        if any(c.get("name") == body["name"] and not c.get("isArchived") for c in self._listing):
            log.warning("score config of that name does not fit; scores are sent without configId", name=body["name"])
            return None
        await self.client.create_score_config(body)
        self._listing = await self.client.score_configs()  # another replica may have created one meanwhile
        return _oldest(self._listing, body)


def _oldest(configs: list[dict[str, Any]], body: Mapping[str, Any]) -> ConfigRef | None:
    fitting = [c for c in configs if c.get("name") == body["name"] and _fits(c, body)]
    if not fitting:
        return None
    best = min(fitting, key=lambda c: (str(c.get("createdAt") or ""), str(c["id"])))
    return ConfigRef(str(best["id"]), str(body["name"]), str(body["dataType"]))
