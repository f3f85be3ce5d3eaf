"""Conversation histories stored once per thread, as chains of messages addressed by content hash.

A chat span carries the conversation so far: turn n repeats the n-1 turns before it, so spans stored
as they come grow with the square of the conversation. Before a span is stored, each history it carries
is cut into its messages. Every message becomes a node whose id hashes the message and the id of the
node before it; nodes are stored once per thread, and the span keeps only the id of its history's last
node (a marker in place of the attribute). A history that extends an earlier one shares its nodes, so a
thread stores each message once, plus what each span adds. Reading a span puts its histories back.

Histories are looked for where the conventions read them (DESIGN §5), and only there:

- flattened `llm.input_messages.N.*` (OpenInference) and `gen_ai.prompt.N.*` (Traceloop): one node
  per N, when the indices run 0..n-1;
- JSON message lists, as a string or a structured value, in `gen_ai.input.messages`, `input.value`,
  `ai.prompt.messages` and the other input keys below: a list of objects, or an object with a
  `messages` list of objects (the rest of the object stays in the marker).

A JSON string comes back as compact JSON of the same value (the original's spacing is not kept).
Anything else, and anything that does not parse, is stored as it came. Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Set
from functools import partial
from typing import Any, NamedTuple, TypeVar

import orjson

from tracing_eval.model import Span, SpanEvent

T = TypeVar("T")

#: Marker key of an attribute whose history was moved into the thread's message chains.
MARK = "\x00history"
#: Flattened histories, one node per index, with the key that shows one is there (its first message's
#: role); a history without it stays inline.
FLAT_PREFIXES = (
    ("llm.input_messages.", "llm.input_messages.0.message.role"),
    ("gen_ai.prompt.", "gen_ai.prompt.0.role"),
)
#: Attributes holding a JSON message list (or an object with `messages`): conversation inputs, and
#: system instructions, which every chat span of a thread repeats.
JSON_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.system_instructions",
        "gen_ai.prompt",
        "input.value",
        "traceloop.entity.input",
        "ai.prompt",
        "ai.prompt.messages",
        "langfuse.observation.input",
        "langfuse.trace.input",
    }
)
#: Values shorter than this stay inline: a node costs more than it saves.
MIN_CHARS = 64


#: The nodes of histories by id: (parent id or None for the first message, the message as JSON).
Nodes = dict[str, tuple[str | None, bytes]]


def node_id(parent: str | None, data: bytes) -> str:
    """The id of a history node: a hash of its message and of the node before it."""
    h = hashlib.sha256(data)
    if parent is not None:
        h.update(parent.encode())
    return h.hexdigest()[:32]


class Chains:
    """The latest chain seen per (thread, attribute), so a history that extends it is hashed only
    where it is new (its items are compared with the last chain's, position by position). A chain
    may keep what its items were made from (`source`), for the next history of its slot to reuse
    items it shares. Holds at most about `max_bytes`, least recent chains first out; forgetting one
    only costs hashing again."""

    def __init__(self, max_bytes: int = 48 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        #: slot -> (items, node ids, bytes held, source, bytes of the items)
        self._last: dict[tuple[str, str], tuple[list[bytes], list[str], int, Any, int]] = {}

    def source(self, slot: tuple[str, str]) -> Any:
        """What the last chain of `slot` was made from, with its items, or None."""
        found = self._last.get(slot)
        return None if found is None or found[3] is None else (found[3], found[0])

    def add(
        self,
        slot: tuple[str, str],
        items: list[bytes],
        nodes: Nodes,
        source: Any = None,
        stored: Set[str] = frozenset(),
    ) -> str:
        """Add the nodes of the chain of `items` to `nodes`, but for those already in `nodes` or in
        `stored` (a node in either has its whole chain there too, so only the tail after the last such
        node is added); returns the id of its last node."""
        last_items, last_ids, last_size, _, last_bytes = self._last.pop(slot, ([], [], 0, None, 0))
        self.held -= last_size
        same = min(len(items), len(last_items))  # the shared leading items (list equality runs in C)
        if items[:same] != last_items[:same]:
            same = next(i for i, (a, b) in enumerate(zip(items, last_items, strict=False)) if a != b)
        kept = last_items[:same]
        ids = last_ids[:same]
        kept_bytes = last_bytes if same == len(last_items) else sum(map(len, kept))
        parent: str | None = ids[-1] if ids else None
        for data in items[same:]:
            parent = node_id(parent, data)
            kept.append(bytes(memoryview(data)))  # an exact-size copy to keep (orjson's output may not be)
            ids.append(parent)
            kept_bytes += len(data)
        new = len(ids)  # the nodes after the last one that is there already
        while new and ids[new - 1] not in nodes and ids[new - 1] not in stored:
            new -= 1
        if new < len(ids):
            parents = [ids[new - 1] if new else None, *ids[new:-1]]
            nodes.update(zip(ids[new:], zip(parents, kept[new:], strict=True), strict=True))
        size = kept_bytes + 100 * len(ids) + _size_of(source, kept_bytes)
        self._last[slot] = (kept, ids, size, source, kept_bytes)
        self.held += size
        while self.held > self.max_bytes and self._last:
            self.held -= self._last.pop(next(iter(self._last)))[2]
        assert parent is not None
        return parent


def _size_of(source: Any, items_bytes: int) -> int:
    """About how many bytes a chain's source holds: a JSON text, or the keys and values of a
    flattened history (string objects cost about 50 bytes besides their characters; the values
    count as much as the chain's `items_bytes`, the JSON of the messages they make)."""
    if source is None:
        return 0
    if type(source) is str:
        return len(source) + 50
    if type(source) is ObjectText:
        return len(source.text) + 50
    keys = source[0]
    return sum(map(len, keys)) + items_bytes + 100 * len(keys)


class ObjectText(NamedTuple):
    """A JSON object text with a `messages` list, kept with its chain: where that list's closing
    bracket is in `text` (None until the next text of the slot showed it, see `_object_close`), and
    the marker's `at` and `rest` (where `messages` is among the keys, and the other members)."""

    text: str
    close: int | None
    at: int
    rest: dict[str, Any]


def _json_history(
    value: Any, nodes: Nodes, chains: Chains, slot: tuple[str, str], stored: Set[str]
) -> dict[str, Any] | None:
    """The marker for a JSON message list (string or structured), or None to keep `value` inline."""
    as_text = isinstance(value, str)
    if as_text:
        if len(value) < MIN_CHARS or value.lstrip()[:1] not in ("[", "{"):
            return None
        grown = _grown_list(value, chains, slot)
        if grown is not None:
            return {"s": True, "head": chains.add(slot, grown, nodes, value, stored)}
        found = _grown_object(value, chains, slot)
        if found is not None:
            items, obj = found
            return {"s": True, "at": obj.at, "rest": obj.rest, "head": chains.add(slot, items, nodes, obj, stored)}
        text = value
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    marker: dict[str, Any] = {"s": as_text}
    messages = value
    if isinstance(value, dict):
        messages = value.get("messages")
        if not isinstance(messages, list):
            return None
        keys = list(value)
        marker["at"] = keys.index("messages")
        marker["rest"] = {k: v for k, v in value.items() if k != "messages"}
    if type(messages) is not list or not messages:
        return None
    try:
        items = [orjson.dumps(m) for m in messages if type(m) is dict]
    except (TypeError, orjson.JSONEncodeError):
        return None
    if len(items) != len(messages):  # not a list of objects
        return None
    if not as_text and sum(map(len, items)) < MIN_CHARS:
        return None
    # a JSON text is kept with its chain: the next one of the slot may only add to it
    source: Any = None
    if as_text and messages is value:
        source = text
    elif as_text:
        source = ObjectText(text, _object_close(text, items, marker, chains.source(slot)), marker["at"], marker["rest"])
    marker["head"] = chains.add(slot, items, nodes, source, stored)
    return marker


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b` (slices compared in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _object_close(text: str, items: list[bytes], marker: dict[str, Any], last: Any) -> int | None:
    """Where the `messages` list of object text `text` (parsed: its `items` and `marker`) closes, when
    the last text of the slot is the same object with messages appended to that list (then `text` is
    the last one with `,<messages>` put before one `]` of it, and the parse shows which list grew:
    only `messages`, by as many as were put in); else None."""
    if last is None or type(last[0]) is not ObjectText:
        return None
    (old, _, at, rest), last_items = last
    n = len(last_items)
    if (
        len(text) <= len(old)
        or len(items) <= n
        or items[:n] != last_items
        or (at, rest)
        != (
            marker["at"],
            marker["rest"],
        )
    ):
        return None
    cut = _common_prefix(old, text)
    if old[cut : cut + 1] != "]" or text[cut : cut + 1] != "," or not text.endswith(old[cut:]):
        return None
    middle = text[cut + 1 : len(text) - (len(old) - cut)]
    try:
        added = [orjson.dumps(m) for m in orjson.loads("[" + middle + "]")]
    except (orjson.JSONDecodeError, TypeError, orjson.JSONEncodeError):
        return None
    return cut + 1 + len(middle) if added == items[n:] else None


def _grown_object(text: str, chains: Chains, slot: tuple[str, str]) -> tuple[list[bytes], ObjectText] | None:
    """The items of object text `text` when it is the last object text of its slot with messages
    appended to its `messages` list (where that list closes is known), parsing only those, with what
    to keep for the next one; None otherwise."""
    last = chains.source(slot)
    if last is None or type(last[0]) is not ObjectText or last[0].close is None:
        return None
    obj, last_items = last
    old, close = obj.text, obj.close
    if text == old:
        return list(last_items), obj
    if len(text) <= len(old) or text[close : close + 1] != "," or not text.startswith(old[:close]):
        return None
    if not text.endswith(old[close:]):
        return None
    middle = text[close + 1 : len(text) - (len(old) - close)]
    try:
        added = orjson.loads("[" + middle + "]")
        items = [orjson.dumps(m) for m in added if type(m) is dict]
    except (orjson.JSONDecodeError, TypeError, orjson.JSONEncodeError):
        return None
    if not items or len(items) != len(added):
        return None
    return [*last_items, *items], obj._replace(text=text, close=close + 1 + len(middle))


def _grown_list(text: str, chains: Chains, slot: tuple[str, str]) -> list[bytes] | None:
    """The items of JSON list `text` when it is the last list of its slot (as text) with messages
    appended, parsing only those; None otherwise. The last text parsed as a list of objects, so
    `text` starts with its messages, whole, and is valid when what follows is a list of objects."""
    last = chains.source(slot)
    if last is None or type(last[0]) is not str:
        return None
    last_text, last_items = last
    if text == last_text:
        return list(last_items)
    head = last_text.rstrip()[:-1]  # the last list without its closing bracket
    if not text.startswith(head) or text[len(head) : len(head) + 1] != ",":
        return None
    try:
        added = orjson.loads("[" + text[len(head) + 1 :])
        items = [orjson.dumps(m) for m in added if type(m) is dict]
    except (orjson.JSONDecodeError, TypeError, orjson.JSONEncodeError):
        return None
    if not items or len(items) != len(added):
        return None
    return [*last_items, *items]


def _flat_history(
    attrs: Mapping[str, Any], prefix: str, nodes: Nodes, chains: Chains, slot: tuple[str, str], stored: Set[str]
) -> tuple[dict[str, Any], list[str]] | None:
    """The marker for the flattened history under `prefix` and the keys it replaces, or None when its
    keys are not grouped by index 0, 1, 2, ... in order (such a history stays as it came).

    The messages a history shares with the last one of its slot (the same keys and the same string
    values, in the same order: a conversation that grew) take their items from it unchanged."""
    size = len(prefix)
    keys = [key for key in attrs if key[:size] == prefix]  # as `values.indexed` finds them
    values = list(map(attrs.__getitem__, keys))
    items: list[bytes] = []
    ends: list[int] = []  # where each message's keys end
    start = 0
    last = chains.source(slot)
    if last is not None and type(last[0]) is tuple:
        (last_keys, last_values, last_ends), last_items = last
        n = min(len(keys), len(last_keys))
        if keys[:n] == last_keys[:n] and values[:n] == last_values[:n] and set(map(type, values[:n])) <= {str}:
            # strings only: equal strings make equal items (1 == 1.0 == True would not)
            shared = len(last_ends) if n == len(keys) == len(last_keys) else bisect_left(last_ends, n)
            items, ends = last_items[:shared], last_ends[:shared]
            start = ends[-1] if ends else 0
    groups: list[dict[str, Any]] = []
    group: dict[str, Any] = {}
    current: str | None = None
    following = str(len(items))
    for at in range(start, len(keys)):
        index, dot, field = keys[at][size:].partition(".")
        if index != current:
            if index != following or not dot:
                return None
            if groups:
                ends.append(at)
            group = {}
            groups.append(group)
            current, following = index, str(len(items) + len(groups))
        elif not dot:
            return None
        group[field] = values[at]
    if groups:
        ends.append(len(keys))
    try:
        items += [orjson.dumps(group) for group in groups]
    except (TypeError, orjson.JSONEncodeError):
        return None
    return {"flat": True, "head": chains.add(slot, items, nodes, (keys, values, ends), stored)}, keys


def split(
    attrs: dict[str, Any], nodes: Nodes, chains: Chains, thread_key: str, stored: Set[str] = frozenset()
) -> dict[str, Any]:
    """`attrs` with its histories moved into `nodes` (the same dict when it has none); nodes that the
    thread has in `nodes` or in `stored` already are not added again."""
    out: dict[str, Any] | None = None
    for key in JSON_KEYS.intersection(attrs):
        marker = _json_history(attrs[key], nodes, chains, (thread_key, key), stored)
        if marker is not None:
            out = out if out is not None else dict(attrs)
            out[key] = {MARK: marker}
    for prefix, first in FLAT_PREFIXES:
        if first not in attrs:
            continue
        found = _flat_history(attrs, prefix, nodes, chains, (thread_key, prefix), stored)
        if found is not None:
            marker, keys = found
            out = out if out is not None else dict(attrs)
            for key in keys:
                del out[key]
            out[prefix] = {MARK: marker}
    return attrs if out is None else out


def _event_record(event: SpanEvent, nodes: Nodes, chains: Chains, thread_key: str, stored: Set[str]) -> dict[str, Any]:
    attrs = event.attributes
    attributes = split(attrs, nodes, chains, thread_key, stored) if isinstance(attrs, dict) else attrs
    return {"name": event.name, "time_ns": event.time_ns, "attributes": attributes, "body": event.body}


def span_record(span: Span, nodes: Nodes, chains: Chains, thread_key: str, stored: Set[str] = frozenset()) -> bytes:
    """The stored form of `span` (JSON) in thread `thread_key`, its histories' nodes added to `nodes`
    but for those the thread has there or in `stored` (committed) already."""
    return orjson.dumps(
        {
            "trace_id": span.trace_id,
            "span_id": span.span_id,
            "parent_id": span.parent_id,
            "name": span.name,
            "kind": span.kind,
            "start_ns": span.start_ns,
            "end_ns": span.end_ns,
            "status": span.status,
            "status_message": span.status_message,
            "attributes": split(span.attributes, nodes, chains, thread_key, stored),
            "events": [_event_record(e, nodes, chains, thread_key, stored) for e in span.events],
            "resource": span.resource,
            "scope": span.scope,
        }
    )


def event_record(
    event: SpanEvent, nodes: Nodes, chains: Chains, thread_key: str, stored: Set[str] = frozenset()
) -> bytes:
    """The stored form of a log event joined to a span, its histories added as `span_record` does."""
    return orjson.dumps(_event_record(event, nodes, chains, thread_key, stored))


class Joined(dict[str, Any]):
    """Attributes with their histories put back, which also keep what reading them again would make
    (read only: shared), so that the conventions need not make it again:

    - `groups`: each flattened history as the groups `conventions.values.indexed` would make of it
      (prefix -> one dict of fields per message), and `plain`: the other keys; valid while the
      attributes keep `size` keys;
    - `parsed`: each JSON list text with what gives the items it decodes to (key -> (the text, a
      function)), for `conventions.values.stored_items`; valid while the key holds that very text.
    """

    __slots__ = ("groups", "parsed", "plain", "size")

    groups: dict[str, list[dict[str, Any]]]
    parsed: dict[str, tuple[str, Callable[[], list[Any]]]]
    plain: list[str]
    size: int


class Histories:
    """Reads histories back from the nodes of one thread (`id -> (parent, data)`), each node parsed
    once however many spans share it; a history read back as JSON text is not parsed at all (a node
    holds its message as the compact JSON that reading it would write again) until a reader asks
    for its items (`Joined.parsed`)."""

    def __init__(self, nodes: Mapping[str, tuple[str | None, bytes]]) -> None:
        self._nodes = nodes
        self._chains: dict[str, list[Any]] = {}  # head -> its items
        self._items: dict[str, Any] = {}  # node -> its item, parsed once
        self._texts: dict[str, list[bytes]] = {}  # head -> its items' JSON
        self._flat: dict[tuple[str, str], dict[str, Any]] = {}  # (prefix, head) -> its flattened fields

    def texts(self, head: str) -> list[bytes]:
        """The JSON of each item of the chain ending at `head`, as `messages` would dump them."""
        return self._chain(self._texts, head, lambda n: self._nodes[n][1])

    def messages(self, head: str) -> list[Any]:
        """The decoded items of the chain ending at `head` (a missing node is a `KeyError`)."""
        return self._chain(self._chains, head, self._item)

    def _chain(self, known: dict[str, list[T]], head: str, item: Callable[[str], T]) -> list[T]:
        """The chain ending at `head`, from the longest chain already in `known` plus the nodes after it."""
        found = known.get(head)
        if found is None:
            walked: list[str] = []
            node: str | None = head
            while node is not None and node not in known:
                walked.append(node)
                node = self._nodes[node][0]
            found = list(known[node]) if node is not None else []
            found.extend(map(item, reversed(walked)))
            known[head] = found
        return found

    def decoded(self, head: str, text: str) -> list[Any]:
        """The items of `text`, the JSON list joined from the chain ending at `head`: from the longest
        chain decoded already, else by decoding `text` whole (one call costs less than one per node)."""
        found = self._chains.get(head)
        if found is None:
            node: str | None = head if self._chains else None  # none decoded yet: nothing to walk to
            while node is not None and node not in self._chains:
                node = self._nodes[node][0]
            found = self.messages(head) if node is not None else self._chains.setdefault(head, orjson.loads(text))
        return found

    def flattened(self, prefix: str, head: str) -> dict[str, Any]:
        """The chain ending at `head` as flattened attributes (`<prefix>N.<field>`, in index order;
        read only): the longest such chain already made, copied, and the fields of the messages after it."""
        found = self._flat.get((prefix, head))
        if found is None:
            items = self.messages(head)
            start, node = len(items), head if self._flat else None  # none made yet: nothing to walk to
            while node is not None and (prefix, node) not in self._flat:
                start, node = start - 1, self._nodes[node][0]
            found, start = (dict(self._flat[prefix, node]), start) if node is not None else ({}, 0)
            for i in range(start, len(items)):
                for field, value in items[i].items():
                    found[f"{prefix}{i}.{field}"] = value
            self._flat[prefix, head] = found
        return found

    def joined(self) -> None:
        """Every span is read: forget the chains' JSON, which only joining needs (the spans keep this
        object for decoding their JSON histories, `Joined.parsed`)."""
        self._texts.clear()
        self._flat.clear()

    def _item(self, node_id: str) -> Any:
        item = self._items.get(node_id)
        if item is None:
            item = self._items[node_id] = orjson.loads(self._nodes[node_id][1])
        return item

    def join(self, attrs: Any) -> Any:
        """`attrs` with every history marker replaced by the history it stands for."""
        if not isinstance(attrs, dict):
            return attrs
        out = Joined()
        out.groups, out.parsed, out.plain = {}, {}, []
        marked = False
        for key, value in attrs.items():
            marker = value.get(MARK) if type(value) is dict and len(value) == 1 else None
            if type(marker) is dict:
                marked = True
            if type(marker) is not dict or marker.get("head") not in self._nodes:  # not one, or only looks like one
                out[key] = value
                out.plain.append(key)
                continue
            head = marker["head"]
            if marker.get("flat"):
                out.update(self.flattened(key, head))
                out.groups[key] = self.messages(head)
                continue
            restored: Any
            if marker["s"]:  # JSON text: the nodes' JSON joined, as dumping the parsed items would write it
                restored = b"[" + b",".join(self.texts(head)) + b"]"
                if "rest" not in marker:  # a JSON list text, decoded if a reader asks
                    out[key] = restored.decode()
                    out.plain.append(key)
                    out.parsed[key] = (out[key], partial(self.decoded, head, out[key]))
                    continue
                restored = orjson.Fragment(restored)
            else:
                restored = list(self.messages(head))  # callers may change it; the chain is shared
            if "rest" in marker:
                pairs = list(marker["rest"].items())
                pairs.insert(marker["at"], ("messages", restored))
                restored = dict(pairs)
            out[key] = orjson.dumps(restored).decode() if marker["s"] else restored
            out.plain.append(key)
        if not marked:  # no history to put back
            return attrs
        out.size = len(out)
        return out


M = TypeVar("M", Span, SpanEvent)
#: The fields of the models read back, in order: stored data holds them all, in this order.
_FIELDS: dict[type[Any], tuple[str, ...]] = {Span: tuple(Span.model_fields), SpanEvent: tuple(SpanEvent.model_fields)}


def _construct(cls: type[M], values: dict[str, Any]) -> M:
    """`cls.model_construct(**values)`: when `values` holds every field in order, the same model
    (every field set, no defaults to fill, no extra or private values: the slots pydantic's
    `model_construct` sets) without looking up each field."""
    if tuple(values) != _FIELDS[cls]:
        return cls.model_construct(**values)
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def _event(data: dict[str, Any], join: Callable[[Any], Any]) -> SpanEvent:
    data["attributes"] = join(data["attributes"])
    return _construct(SpanEvent, data)


#: How a marker's key reads in stored JSON: data without it has no history to put back.
_MARK_JSON = orjson.dumps(MARK)


def read_span(data: bytes, histories: Histories) -> Span:
    """A stored span back as the canonical `Span` (stored data was validated on the way in)."""
    d = orjson.loads(data)
    if _MARK_JSON in data:
        d["attributes"] = histories.join(d["attributes"])
        d["events"] = [_event(e, histories.join) for e in d["events"]]
    else:
        d["events"] = [_construct(SpanEvent, e) for e in d["events"]]
    return _construct(Span, d)


def read_event(data: bytes, histories: Histories) -> SpanEvent:
    """A stored log event back as a `SpanEvent`."""
    return _event(orjson.loads(data), histories.join)


#: How long this process trusts that a node it stored is still there. Retention deletes a thread's
#: nodes only after it has been idle for RETENTION_FLOOR_SECONDS, far longer, so a trusted node is
#: never one that was deleted (by this replica or another).
KNOWN_SECONDS = 600.0
RETENTION_FLOOR_SECONDS = 3600.0


class KnownNodes:
    """Nodes this process stored in threads it changed, for KNOWN_SECONDS: a span whose history
    extends one stored moments ago sends only its new nodes. Holds at most `max_ids` ids, the least
    recently stored threads first out; forgetting is always safe, a forgotten node is merely sent again."""

    def __init__(self, max_ids: int = 200_000) -> None:
        self.max_ids = max_ids
        self.held = 0
        self._threads: dict[str, tuple[float, set[str]]] = {}

    def known(self, thread_key: str, now: float) -> set[str]:
        found = self._threads.get(thread_key)
        if found is None or not 0 <= now - found[0] < KNOWN_SECONDS:
            return set()
        return found[1]

    def stored(self, thread_key: str, ids: Iterable[str], now: float) -> None:
        """`ids` were committed in `thread_key`, whose activity time is now `now`."""
        ids = set(ids)
        found = self._threads.pop(thread_key, None)
        if found is not None:
            self.held -= len(found[1])
            if 0 <= now - found[0] < KNOWN_SECONDS:
                ids |= found[1]
        self._threads[thread_key] = (now, ids)  # most recent last
        self.held += len(ids)
        while self.held > self.max_ids and self._threads:
            self.held -= len(self._threads.pop(next(iter(self._threads)))[1])

    def forget(self, thread_key: str) -> None:
        found = self._threads.pop(thread_key, None)
        if found is not None:
            self.held -= len(found[1])
