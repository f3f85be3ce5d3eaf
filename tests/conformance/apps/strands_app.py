"""Strands Agents with its built-in tracing, on the OpenAI model provider.

The conversation id goes in `Agent(trace_attributes={"session.id": ...})`, which Strands puts on
every span of the agent. `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` (set by the
recorder for `strands-latest`) switches Strands to the latest GenAI message attributes.
"""

from __future__ import annotations

from common import base_url, load_plan, report_versions
from strands import Agent, tool
from strands.models.openai import OpenAIModel
from strands.telemetry import StrandsTelemetry


def main() -> None:
    plan = load_plan()
    telemetry = StrandsTelemetry().setup_otlp_exporter()

    @tool(name=plan.tool_name, description=plan.tool_description)
    def lookup_order(order_id: str) -> str:
        return plan.lookup_order(order_id)

    model = OpenAIModel(
        client_args={"base_url": base_url(), "api_key": "sk-conformance"},
        model_id=plan.model,
        params={"temperature": 0},
    )
    for conversation in plan.conversations:
        agent = Agent(
            model=model,
            tools=[lookup_order],
            system_prompt=plan.system,
            trace_attributes={"session.id": plan.session_id(conversation)},
            callback_handler=None,
        )
        for text in conversation["user_turns"]:
            agent(text)
        telemetry.tracer_provider.force_flush()
    telemetry.tracer_provider.shutdown()
    report_versions("strands-agents", "openai", "opentelemetry-sdk")


if __name__ == "__main__":
    main()
