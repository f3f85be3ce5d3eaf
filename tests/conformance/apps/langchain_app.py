"""Plain LangChain (a chat model with bound tools and a hand-written tool loop) traced by OpenInference.

The conversation id is the run's `metadata={"session_id": ...}`, which the instrumentation reports
as `session.id`. Each user turn runs under one `RunnableLambda`, so it is one trace.
"""

from __future__ import annotations

from common import base_url, load_plan, report_versions
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from openinference.instrumentation.langchain import LangChainInstrumentor
from otel_setup import tracer_provider


def main() -> None:
    plan = load_plan()
    provider = tracer_provider()
    LangChainInstrumentor().instrument(tracer_provider=provider)
    tool = StructuredTool.from_function(plan.lookup_order, name=plan.tool_name, description=plan.tool_description)
    model = ChatOpenAI(model=plan.model, base_url=base_url(), api_key="sk-conformance", temperature=0)
    chat = model.bind_tools([tool])

    def answer(history: list, config: RunnableConfig) -> str:
        while True:
            reply = chat.invoke(history, config=config)
            history.append(reply)
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                history.append(ToolMessage(tool.invoke(call["args"], config=config), tool_call_id=call["id"]))

    turn = RunnableLambda(answer, name="support_turn")
    for conversation in plan.conversations:
        history: list = [SystemMessage(plan.system)]
        for text in conversation["user_turns"]:
            history.append(HumanMessage(text))
            turn.invoke(history, config={"metadata": {"session_id": plan.session_id(conversation)}})
        provider.force_flush()
    provider.shutdown()
    report_versions("langchain-core", "langchain-openai", "openinference-instrumentation-langchain")


if __name__ == "__main__":
    main()
