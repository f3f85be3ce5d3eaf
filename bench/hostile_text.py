"""Hostile text: does any pattern or deterministic metric cost more than linear time in its input?

A trace carries whatever an app, a user or a tool put in it. One message whose text makes a regular
expression backtrack (a long run of "a.a.a..." before a stray "@", "!?!?..." that is never followed by
a space, "order number - - ... - 1!") can hold a worker for minutes or hours. Two checks, on one core:

1. Every compiled pattern that `tracing_eval` holds at module level (in tuples, dicts and objects
   too, such as the slot table and `Folded` pairs) is run (`finditer` to the end) over adversarial
   text: a unit of one or two characters from a small alphabet repeated, with and without a stray
   tail, and for patterns that spell words, those words as a prefix and as units ("order", "order
   - - -"). A pattern is reported when its time grows more than `--ratio` times (default 8) from
   `--size` characters to four times that; linear growth is about 4, quadratic about 16.
2. Every deterministic metric on a four-message thread whose user and assistant messages are the
   texts that were quadratic or worse before the fix (`HOSTILE`; the URL credentials pattern runs on
   log lines, not in a metric, so only the first check sees it), at 16k, 64k and 256k characters
   each: CPU seconds per size and the growth from the last size but one to the last.
3. Every deterministic metric alone on long threads (`--turns`, default 1,000, 2,000 and 4,000
   turns) of two shapes: the synthetic support conversation of `bench/deterministic.py` (a tool call
   every other turn, one result in five an error), and an agent that searches, fails and searches
   again for something else on every turn (`FAILED_SEARCHES`, what made `tool_errors` quadratic).
   CPU milliseconds per length (the fastest of three runs), caches cleared and the garbage collector paused for each timed call
   (its full collections grow with the heap, not with the metric), and the growth over the last
   doubling: linear is about 2, quadratic about 4. Also the judge's transcripts: the window a
   per-turn judged metric shows for every turn of the thread, once (no judge is called).

    .venv/bin/python bench/hostile_text.py                 # a few minutes
    .venv/bin/python bench/hostile_text.py --patterns '' --sizes 4000,16000 --texts emails,repetition
    .venv/bin/python bench/hostile_text.py --patterns '' --sizes '' --turns 800,1600,3200
"""

from __future__ import annotations

import argparse
import gc
import importlib
import itertools
import pkgutil
import random
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pin, table  # noqa: E402

ALPHABET = ("a", "A", "1", ".", "@", "-", "_", " ", "?", "!", "\n", "#", ":", "/", "{", "%", "'", "é", "你")
TAILS = ("", "@", "x@", "\x00")
#: The texts that were quadratic or worse before they were fixed, by what they attack.
HOSTILE = {
    "run of 'a.' before '@' (emails)": lambda n: "a." * (n // 2) + "@",
    "run of '!?' never followed by a space (sentences)": lambda n: "!?" * (n // 2) + "x",
    "run of 'a-' (codes with a digit)": lambda n: "order number " + "a-" * (n // 2),
    "'order number - - ... - 1!' repeated (slot words)": lambda n: ("order number" + " -" * 16 + " 1! ") * (n // 48),
    "run of '{%' (placeholders)": lambda n: "{%" * (n // 2),
    "short sentences of distinct words (repetition)": lambda n: _sentences(n),
}


def _sentences(n: int) -> str:
    """About `n` characters of six-word sentences of distinct words, the same text for the same `n`."""
    rng = random.Random(n)
    words = [f"w{k}" for k in range(5000)]
    return " ".join(" ".join(rng.choices(words, k=6)) + "." for _ in range(n // 36))


def patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern reachable from the package's module globals, by a name for it."""
    import tracing_eval

    found: dict[tuple[str, int], tuple[str, re.Pattern[str]]] = {}
    seen: set[int] = set()

    def walk(name: str, value: Any, depth: int) -> None:
        if id(value) in seen or depth > 4 or isinstance(value, (str, bytes, int, float, type)):
            return
        seen.add(id(value))
        if isinstance(value, re.Pattern):
            found.setdefault((value.pattern, value.flags), (name, value))
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(f"{name}[{k!r}]", v, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for i, v in enumerate(value):
                walk(f"{name}[{i}]", v, depth + 1)
        elif not callable(value) or hasattr(type(value), "__slots__"):
            attrs = dict(getattr(value, "__dict__", {}))
            attrs.update({s: getattr(value, s) for s in getattr(type(value), "__slots__", ()) if hasattr(value, s)})
            for k, v in attrs.items():
                walk(f"{name}.{k}", v, depth + 1)

    for info in pkgutil.walk_packages(tracing_eval.__path__, "tracing_eval."):
        module = importlib.import_module(info.name)
        for key, value in vars(module).items():
            if not isinstance(value, type(sys)):
                walk(f"{info.name}.{key}", value, 0)
    return {name: p for name, p in found.values()}


def attacks(pattern: re.Pattern[str]) -> Iterator[tuple[str, str, str]]:
    """(prefix, unit, tail) triples to repeat the unit of."""
    for a, b in itertools.product(ALPHABET, repeat=2):
        for tail in TAILS:
            yield "", a + b, tail
    words = sorted(set(re.findall(r"[a-z]{2,}", pattern.pattern.lower())))[:12]
    for word in words:
        for unit in (f" {word}", f"{word} ", " -", " ", "-", "."):
            yield word, unit, "!"


def cost(pattern: re.Pattern[str], text: str) -> float:
    start = time.process_time()
    for _ in pattern.finditer(text):
        pass
    return time.process_time() - start


def check_patterns(size: int, ratio: float) -> list[dict[str, Any]]:
    """The patterns whose time grows more than `ratio` times from `size` to 4 x `size` characters."""
    slow = []
    all_patterns = patterns()
    print(f"{len(all_patterns)} patterns", flush=True)
    for name, pattern in all_patterns.items():
        worst: dict[str, Any] | None = None
        for prefix, unit, tail in attacks(pattern):
            small = cost(pattern, prefix + unit * (size // len(unit)) + tail)
            if small < 0.0005:  # too fast to tell growth from noise, at this size and at 4x
                continue
            big = cost(pattern, prefix + unit * (4 * size // len(unit)) + tail)
            if big / small > ratio and (worst is None or big > worst["seconds at 4x"]):
                worst = {"pattern": name, "attack": repr(prefix + unit * 3 + "..." + tail), "growth": big / small}
                worst["seconds at 4x"] = big
        if worst is not None:
            slow.append(worst)
            print(f"  slow: {worst}", flush=True)
    return slow


def check_metrics(sizes: tuple[int, ...], labels: list[str]) -> list[list[str]]:
    """CPU seconds of the deterministic metrics together on each hostile text of `labels`, per size."""
    from tracing_eval.config import DETERMINISTIC_PACK, Settings
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.transcripts import thread_from_messages

    metrics = build_metrics(Settings(), DETERMINISTIC_PACK).deterministic
    rows = []
    for label in labels:
        make = HOSTILE[label]
        seconds = []
        for n in sizes:
            text = make(n)
            roles = ("user", "assistant", "user", "assistant")
            thread = thread_from_messages("hostile", [{"role": r, "content": text} for r in roles])
            start = time.process_time()
            for metric in metrics:
                metric.evaluate(thread)
            seconds.append(time.process_time() - start)
        growth = seconds[-1] / max(seconds[-2], 1e-6)
        rows.append([label, *(f"{s:.3f}" for s in seconds), f"{growth:.1f}"])
        print(f"  {label}: {seconds}", flush=True)
    return rows


def _search(cid: str, query: str) -> dict[str, Any]:
    """An assistant message that calls `search` with `query`."""
    function = {"name": "search", "arguments": f'{{"query": "{query}"}}'}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": function}]}


def failed_searches(turns: int, chinese: bool = False) -> list[dict[str, Any]]:
    """An agent thread in which every turn's search fails and a search for the other place succeeds
    (in English, or in Chinese: text without spaces, not in ASCII)."""
    ask, first, second, found = (
        ("请搜索飞往城市{k}的航班，或者飞往小镇{k}的航班。", "飞往城市{k}", "飞往小镇{k}", "我为您找到了一个航班。")
        if chinese
        else (
            "Search flights to city{k}, or else flights to town{k}.",
            "flights to city{k}",
            "flights to town{k}",
            "I found a flight for you.",
        )
    )
    messages: list[dict[str, Any]] = []
    for k in range(turns):
        messages += [
            {"role": "user", "content": ask.format(k=k)},
            _search(f"a{k}", first.format(k=k)),
            {"role": "tool", "tool_call_id": f"a{k}", "content": "Error: no flights found"},
            _search(f"b{k}", second.format(k=k)),
            {"role": "tool", "tool_call_id": f"b{k}", "content": '{"flights": ["XY123"]}'},
            {"role": "assistant", "content": found},
        ]
    return messages


def check_lengths(turns: tuple[int, ...], repeat: int) -> list[list[str]]:
    """CPU ms (the fastest of `repeat` runs) of each deterministic metric alone on threads of each
    length, per thread shape."""
    from deterministic import clear_metric_caches, synthetic_lines

    from tracing_eval.config import DETERMINISTIC_PACK, Settings
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.transcripts import thread_from_json_line, thread_from_messages

    metrics = build_metrics(Settings(), DETERMINISTIC_PACK).deterministic
    shapes = {
        "support conversation": lambda n: thread_from_json_line(synthetic_lines(1, n)[0], 1),
        "failed searches": lambda n: thread_from_messages("searches", failed_searches(n)),
        "failed searches, Chinese": lambda n: thread_from_messages("searches", failed_searches(n, chinese=True)),
    }
    rows = []
    for shape, make in shapes.items():
        threads = [make(n) for n in turns]
        for metric in metrics:
            ms = []
            for thread in threads:
                runs = []
                for _ in range(repeat):
                    clear_metric_caches()
                    gc.collect()
                    gc.disable()
                    start = time.process_time()
                    metric.evaluate(thread)
                    runs.append(1000 * (time.process_time() - start))
                    gc.enable()
                ms.append(min(runs))
            rows.append(_length_row(shape, metric.spec.name, ms))
        ms = [1000 * _windows_cpu(thread) for thread in threads]
        rows.append(_length_row(shape, "judge transcripts: every turn's window", ms))
    return rows


def _length_row(shape: str, name: str, ms: list[float]) -> list[str]:
    print(f"  {shape}, {name}: {[round(m, 1) for m in ms]}", flush=True)
    return [shape, name, *(f"{m:.1f}" for m in ms), f"{ms[-1] / max(ms[-2], 1e-6):.1f}"]


def _windows_cpu(thread: Any) -> float:
    """CPU seconds to render what a per-turn judged metric shows the judge for every turn: the turn
    and the two before it, up to its user message, and the injection evidence of that window."""
    from tracing_eval.metrics.judged.transcript import Transcripts

    gc.collect()
    gc.disable()
    start = time.process_time()
    transcripts = Transcripts(thread)
    for turn in thread.turns:
        first = max(0, turn.index - 2)
        transcripts.window(first, turn.index, turn.messages[0].position)
        transcripts.injection(first, turn.index)
    seconds = time.process_time() - start
    gc.enable()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--patterns", default="all", help="'' to skip the pattern check")
    ap.add_argument("--size", type=int, default=2000, help="characters of the smaller attack text")
    ap.add_argument("--ratio", type=float, default=8.0, help="growth from size to 4 x size that counts as slow")
    ap.add_argument(
        "--sizes", default="16000,64000,256000", help="characters per message for the metrics check ('' to skip)"
    )
    ap.add_argument("--turns", default="1000,2000,4000", help="thread lengths for the long-thread check ('' to skip)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per metric and length in the long-thread check")
    ap.add_argument(
        "--texts", default="", help="only the hostile texts whose label holds one of these words (comma-separated)"
    )
    args = ap.parse_args()
    pin(0)
    if args.patterns:
        slow = check_patterns(args.size, args.ratio)
        print(f"\npatterns whose time grows more than {args.ratio:g}x from {args.size} to {4 * args.size} characters:")
        print(
            table(
                ["pattern", "attack", "growth", "s at 4x"],
                [[s["pattern"], s["attack"], f"{s['growth']:.1f}", f"{s['seconds at 4x']:.3f}"] for s in slow],
            )
            if slow
            else "none"
        )
    if args.sizes:
        sizes = tuple(int(n) for n in args.sizes.split(","))
        words = [w.strip() for w in args.texts.split(",") if w.strip()]
        rows = check_metrics(sizes, [label for label in HOSTILE if not words or any(w in label for w in words)])
        print("\nevery deterministic metric on a thread of four such messages, CPU seconds:")
        print(table(["text (each message)", *(f"{n // 1000}k chars" for n in sizes), "growth, last 4x"], rows))
    if args.turns:
        turns = tuple(int(n) for n in args.turns.split(","))
        rows = check_lengths(turns, args.repeat)
        print("\neach deterministic metric alone on long threads, CPU ms:")
        print(table(["thread", "metric", *(f"{n:,} turns" for n in turns), "growth, last 2x"], rows))


if __name__ == "__main__":
    main()
