"""Test doubles that speak real protocols over loopback (an OpenAI-compatible server, ...)."""

from .openai_server import (
    Exchange,
    FakeOpenAIServer,
    Handler,
    Reply,
    ScriptedHandler,
    ScriptError,
    SeededHandler,
    ToolCall,
    count_tokens,
    first_user_message,
    prompt_tokens,
)

__all__ = [
    "Exchange",
    "FakeOpenAIServer",
    "Handler",
    "Reply",
    "ScriptError",
    "ScriptedHandler",
    "SeededHandler",
    "ToolCall",
    "count_tokens",
    "first_user_message",
    "prompt_tokens",
]
