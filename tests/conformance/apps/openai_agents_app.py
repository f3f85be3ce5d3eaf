"""The OpenAI Agents SDK on the Chat Completions API, traced by openinference-instrumentation-openai-agents.

The instrumentation does not export `RunConfig(group_id=...)`, so the conversation id comes from
OpenInference's `using_session(...)` around each run (`session.id` on every span). The SDK's own
trace exporter (to OpenAI) is replaced, not added to: `set_trace_processors([])` first.
"""

from __future__ import annotations

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_trace_processors,
)
from common import base_url, load_plan, report_versions
from openai import AsyncOpenAI
from openinference.instrumentation import using_session
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from otel_setup import tracer_provider


def main() -> None:
    plan = load_plan()
    provider = tracer_provider()
    set_trace_processors([])
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)

    @function_tool(name_override=plan.tool_name, description_override=plan.tool_description)
    def lookup_order(order_id: str) -> str:
        return plan.lookup_order(order_id)

    client = AsyncOpenAI(base_url=base_url(), api_key="sk-conformance")
    model = OpenAIChatCompletionsModel(model=plan.model, openai_client=client)
    agent = Agent(name="support", instructions=plan.system, tools=[lookup_order], model=model)
    for conversation in plan.conversations:
        session_id = plan.session_id(conversation)
        history: list = []
        for text in conversation["user_turns"]:
            with using_session(session_id):
                result = Runner.run_sync(
                    agent, [*history, {"role": "user", "content": text}], run_config=RunConfig(group_id=session_id)
                )
            history = result.to_input_list()
        provider.force_flush()
    provider.shutdown()
    report_versions("openai-agents", "openai", "openinference-instrumentation-openai-agents")


if __name__ == "__main__":
    main()
