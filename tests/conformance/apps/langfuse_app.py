"""The Langfuse Python SDK 5: its OpenAI integration inside an agent observation per turn, tools as
tool observations, the session id from `propagate_attributes(session_id=...)`.

The SDK exports OTLP/HTTP to `<base_url>/api/public/otel/v1/traces`; here the base URL is the
loopback capture endpoint, so nothing reaches a Langfuse server.
"""

from __future__ import annotations

import json
import os

from common import base_url, load_plan, report_versions
from langfuse import Langfuse, propagate_attributes
from langfuse.openai import OpenAI


def main() -> None:
    plan = load_plan()
    langfuse = Langfuse(
        public_key="pk-lf-conformance",
        secret_key="sk-lf-conformance",
        base_url=os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"],
        tracing_enabled=True,
    )
    client = OpenAI(base_url=base_url(), api_key="sk-conformance")
    for conversation in plan.conversations:
        history: list[dict] = [{"role": "system", "content": plan.system}]
        for text in conversation["user_turns"]:
            history.append({"role": "user", "content": text})
            with (
                langfuse.start_as_current_observation(as_type="agent", name="support-turn", input=text) as turn,
                propagate_attributes(session_id=plan.session_id(conversation)),
            ):
                while True:
                    reply = client.chat.completions.create(
                        model=plan.model, messages=history, tools=[plan.tool_schema()], temperature=0
                    )
                    message = reply.choices[0].message
                    history.append(message.model_dump(exclude_none=True))
                    if not message.tool_calls:
                        turn.update(output=message.content)
                        break
                    for call in message.tool_calls:
                        arguments = json.loads(call.function.arguments)
                        with langfuse.start_as_current_observation(
                            as_type="tool", name=call.function.name, input=arguments
                        ) as tool:
                            result = plan.lookup_order(**arguments)
                            tool.update(output=result)
                        history.append({"role": "tool", "tool_call_id": call.id, "content": result})
        langfuse.flush()
    langfuse.shutdown()
    report_versions("langfuse", "openai", "opentelemetry-sdk")


if __name__ == "__main__":
    main()
