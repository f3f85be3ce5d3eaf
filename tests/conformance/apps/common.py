"""What every recording app shares (standard library only: each app runs in its framework's own venv).

An app is started by `record.py` with the plan file as its only argument and these variables:
`OPENAI_BASE_URL` / `OPENAI_API_KEY` (the loopback fake model) and `OTEL_EXPORTER_OTLP_ENDPOINT`
(the loopback capture endpoint). It plays every conversation of the plan, flushes its spans after
each one, and prints the versions of the libraries it used as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any


@dataclass(frozen=True)
class Plan:
    prefix: str
    model: str
    system: str
    tool_name: str
    tool_description: str
    results: dict[str, str]
    conversations: list[dict[str, Any]]

    def session_id(self, conversation: dict[str, Any]) -> str:
        """The conversation id the app tags its spans with: `<recording>/<conversation>`."""
        return self.prefix + conversation["id"]

    def lookup_order(self, order_id: str) -> str:
        return self.results.get(order_id, f"No order {order_id}.")

    def tool_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI chat `tools` entry, for apps that call the model themselves."""
        parameters = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
        return {
            "type": "function",
            "function": {"name": self.tool_name, "description": self.tool_description, "parameters": parameters},
        }


def load_plan() -> Plan:
    raw = json.loads(open(sys.argv[1], encoding="utf-8").read())
    tool = raw["tool"]
    return Plan(
        raw["prefix"],
        raw["model"],
        raw["system"],
        tool["name"],
        tool["description"],
        tool["results"],
        raw["conversations"],
    )


def base_url() -> str:
    return os.environ["OPENAI_BASE_URL"]


def traces_endpoint() -> str:
    return os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"


def report_versions(*packages: str) -> None:
    """Print `{"versions": {package: version}}` for the recorder to write down."""
    print(json.dumps({"versions": {p: metadata.version(p) for p in packages}}), flush=True)
