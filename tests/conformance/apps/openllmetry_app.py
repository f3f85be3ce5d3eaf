"""OpenLLMetry (the Traceloop SDK) on the plain OpenAI client, with a workflow per turn and a tool task.

The conversation id is `Traceloop.set_association_properties({"session_id": ...})`, reported as
`traceloop.association.properties.session_id`. Anonymous telemetry is off (`telemetry_enabled`).
"""

from __future__ import annotations

import json

from common import base_url, load_plan, report_versions, traces_endpoint
from openai import OpenAI
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import tool, workflow


def main() -> None:
    plan = load_plan()
    Traceloop.init(
        app_name="conformance-openllmetry",
        api_endpoint=traces_endpoint().removesuffix("/v1/traces"),
        disable_batch=True,
        telemetry_enabled=False,
    )
    client = OpenAI(base_url=base_url(), api_key="sk-conformance")

    @tool(name=plan.tool_name)
    def lookup_order(order_id: str) -> str:
        return plan.lookup_order(order_id)

    @workflow(name="support_turn")
    def turn(history: list[dict]) -> str:
        while True:
            reply = client.chat.completions.create(
                model=plan.model, messages=history, tools=[plan.tool_schema()], temperature=0
            )
            message = reply.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                result = lookup_order(**json.loads(call.function.arguments))
                history.append({"role": "tool", "tool_call_id": call.id, "content": result})

    for conversation in plan.conversations:
        Traceloop.set_association_properties({"session_id": plan.session_id(conversation)})
        history: list[dict] = [{"role": "system", "content": plan.system}]
        for text in conversation["user_turns"]:
            history.append({"role": "user", "content": text})
            turn(history)
    report_versions("traceloop-sdk", "openai", "opentelemetry-sdk")


if __name__ == "__main__":
    main()
