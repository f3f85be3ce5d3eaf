"""Tables of the state store (SQLAlchemy Core; the same schema on SQLite and PostgreSQL).

PostgreSQL enforces VARCHAR lengths and SQLite does not: columns that hold ids from outside (trace
and span ids are free-form in Langfuse, conversation ids are the application's, and thread keys,
targets and outbox refs embed them) have no length; bounded columns hold values this code makes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    false,
)

SCHEMA_VERSION = 2

metadata = MetaData()

#: Key/value facts about the store itself (schema version).
meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

#: Every span received, as the canonical Span serialised with orjson; the conversation histories it
#: carries are kept in `messages` and stand in `data` as markers (see `store/history.py`).
spans = Table(
    "spans",
    metadata,
    Column("trace_id", String, primary_key=True),
    Column("span_id", String, primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("received_at", Float, nullable=False),
)

#: OTLP log events (e.g. gen_ai.client.inference.operation.details), joined to spans on read.
span_events = Table(
    "span_events",
    metadata,
    Column("trace_id", String, primary_key=True),
    Column("span_id", String, primary_key=True),
    Column("digest", String(32), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("received_at", Float, nullable=False),
)

#: Conversation histories, each message once per thread: nodes of chains addressed by content hash
#: (`id` = hash of the message and of `parent`, the node before it).
messages = Table(
    "messages",
    metadata,
    Column("thread_key", String, primary_key=True),
    Column("id", String(32), primary_key=True),
    Column("parent", String(32)),
    Column("data", LargeBinary, nullable=False),
)

#: One row per trace (= turn): which thread it belongs to and when it last changed. `revision` counts
#: its changes (a stored turn of an older revision is assembled again); `pruned` is set once retention
#: deleted its spans (its stored turn stands for it from then on).
traces = Table(
    "traces",
    metadata,
    Column("trace_id", String, primary_key=True),
    Column("thread_key", String, nullable=False, index=True),
    Column("conversation_id", String),
    Column("start_ns", BigInteger, nullable=False, default=0),
    Column("last_received_at", Float, nullable=False),
    Column("revision", Integer, nullable=False, default=1, server_default="1"),
    Column("pruned", Boolean, nullable=False, default=False, server_default=false()),
)

#: What each trace contributes to its thread (its turn, system prompt, conversation id), assembled
#: once per trace revision: unchanged turns are not assembled again, and after retention deleted a
#: trace's spans this compact transcript is what remains of it.
turns = Table(
    "turns",
    metadata,
    Column("trace_id", String, primary_key=True),
    Column("revision", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

#: Thread state: versions, readiness and the lease of the worker evaluating it.
threads = Table(
    "threads",
    metadata,
    Column("key", String, primary_key=True),
    Column("source", String(64), nullable=False),
    Column("conversation_id", String),
    Column("version", Integer, nullable=False, default=1),
    Column("turns_evaluated_version", Integer, nullable=False, default=0),
    Column("evaluated_version", Integer, nullable=False, default=0),
    Column("first_seen_at", Float, nullable=False),
    Column("last_activity_at", Float, nullable=False),
    Column("sampled", Boolean, nullable=False, default=True),
    Column("status", String(16), nullable=False, default="active"),
    Column("lease_owner", String),
    Column("lease_until", Float),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_eligible_at", Float, nullable=False, default=0.0),
    Column("last_error", Text),
    Index("ix_threads_ready", "status", "sampled", "last_activity_at"),
    Index("ix_threads_idle", "last_activity_at"),
)

#: The latest result per (thread, target, metric); `id` is the deterministic result id.
results = Table(
    "results",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("thread_key", String, nullable=False, index=True),
    Column("target", String, nullable=False),
    Column("metric", String(128), nullable=False),
    Column("thread_version", Integer, nullable=False),
    Column("digest", String(32), nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("updated_at", Float, nullable=False),
)

#: Deliveries owed to sinks, written in the same transaction as the results they carry.
outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("sink", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("ref", String, nullable=False),
    Column("digest", String(32), nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", Float, nullable=False, default=0.0),
    Column("delivered_at", Float),
    Column("failed", Boolean, nullable=False, default=False),
    Column("last_error", Text),
    UniqueConstraint("sink", "kind", "ref", "digest", name="uq_outbox_delivery"),
    Index("ix_outbox_pending", "sink", "delivered_at", "failed", "next_attempt_at"),
    Index("ix_outbox_delivered", "delivered_at"),
)

#: Rows waiting for delivery in the order they are taken (`ORDER BY id`): without it a large backlog
#: is sorted whole for every batch taken.
_waiting = and_(outbox.c.delivered_at.is_(None), outbox.c.failed.is_(False))
Index("ix_outbox_waiting", outbox.c.sink, outbox.c.id, postgresql_where=_waiting, sqlite_where=_waiting)

#: Threads routed for human review, once per thread version.
review_items = Table(
    "review_items",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("thread_key", String, nullable=False),
    Column("thread_version", Integer, nullable=False),
    Column("status", String(16), nullable=False, default="open"),
    Column("reasons", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("resolved_at", Float),
    Column("resolution", Text),
    UniqueConstraint("thread_key", "thread_version", name="uq_review_thread_version"),
    Index("ix_review_resolved", "resolved_at"),
)

#: Progress of pull sources (file offsets, watermarks), committed with the data they read.
source_state = Table(
    "source_state",
    metadata,
    Column("name", String, primary_key=True),
    Column("value", Text, nullable=False),
)

#: Judge answers by request hash (model, endpoint, messages, response format, sampling), so a
#: repeated request is answered without a call. `value` is the answer text and its usage (orjson).
judge_cache = Table(
    "judge_cache",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_judge_cache_created", "created_at"),
)

#: Indexes added by schema version 2 to tables of version 1 (created on upgrade).
V2_INDEXES = (
    "ix_threads_idle",
    "ix_outbox_delivered",
    "ix_outbox_waiting",
    "ix_review_resolved",
    "ix_judge_cache_created",
)
