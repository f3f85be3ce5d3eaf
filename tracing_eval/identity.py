"""How threads are named and sampled: the same answer on every replica."""

from __future__ import annotations

import hashlib


def thread_key(source: str, conversation_id: str | None, trace_id: str) -> str:
    """`source:conversation` for conversations; a trace with no conversation id is its own thread."""
    return f"{source}:{conversation_id}" if conversation_id else f"{source}:trace:{trace_id}"


def session_of(key: str) -> str | None:
    """The conversation a thread key names (the session, in Langfuse's words); None for a lone trace."""
    _, _, rest = key.partition(":")
    return None if rest.startswith("trace:") else rest


def is_sampled(key: str, rate: float) -> bool:
    """Deterministic sampling: hash(key) mapped to [0, 1) compared with the rate."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return h / 2**64 < rate
