"""LangGraph's prebuilt ReAct agent traced by openinference-instrumentation-langchain.

The conversation id is LangGraph's own `thread_id` (`config["configurable"]["thread_id"]`), which
the instrumentation reports as `session.id`; the checkpointer keeps each thread's history.
"""

from __future__ import annotations

from common import base_url, load_plan, report_versions
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from otel_setup import tracer_provider


def main() -> None:
    plan = load_plan()
    provider = tracer_provider()
    LangChainInstrumentor().instrument(tracer_provider=provider)
    model = ChatOpenAI(model=plan.model, base_url=base_url(), api_key="sk-conformance", temperature=0)
    tool = StructuredTool.from_function(plan.lookup_order, name=plan.tool_name, description=plan.tool_description)
    agent = create_react_agent(model, [tool], prompt=plan.system, checkpointer=InMemorySaver())
    for conversation in plan.conversations:
        config = {"configurable": {"thread_id": plan.session_id(conversation)}}
        for text in conversation["user_turns"]:
            agent.invoke({"messages": [{"role": "user", "content": text}]}, config=config)
        provider.force_flush()
    provider.shutdown()
    report_versions("langgraph", "langchain-core", "langchain-openai", "openinference-instrumentation-langchain")


if __name__ == "__main__":
    main()
