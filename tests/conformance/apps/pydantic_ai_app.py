"""pydantic-ai with its built-in OpenTelemetry instrumentation (GenAI conventions).

The conversation id is the run's `conversation_id=...`, reported as `gen_ai.conversation.id`.
"""

from __future__ import annotations

from common import base_url, load_plan, report_versions
from otel_setup import tracer_provider
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def main() -> None:
    plan = load_plan()
    provider = tracer_provider()
    model = OpenAIChatModel(plan.model, provider=OpenAIProvider(base_url=base_url(), api_key="sk-conformance"))
    agent = Agent(
        model,
        system_prompt=plan.system,
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))],
        model_settings={"temperature": 0},
    )

    @agent.tool_plain(name=plan.tool_name, description=plan.tool_description)
    def lookup_order(order_id: str) -> str:
        return plan.lookup_order(order_id)

    for conversation in plan.conversations:
        history = None
        for text in conversation["user_turns"]:
            result = agent.run_sync(text, message_history=history, conversation_id=plan.session_id(conversation))
            history = result.all_messages()
        provider.force_flush()
    provider.shutdown()
    report_versions("pydantic-ai-slim", "openai", "opentelemetry-sdk")


if __name__ == "__main__":
    main()
