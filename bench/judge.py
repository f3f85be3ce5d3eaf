"""Judge pipeline: achieved judge calls/s and judge tokens per thread, tracing-eval next to DeepEval and eval_lib.

One benchmark judge (`judge_server.py`) answers every call after a fixed latency L with a valid JSON answer
and counts, per client, the calls, the tokens (one tokenizer for everybody) and the calls in flight. On the
same N threads (tau-bench airline, gpt-4o) it then runs, one after another:

- `bare` : no metrics, just `--bare-calls` identical requests through a bare `openai` client, at most C at
  once: the ceiling of the HTTP stack (`openai` + httpx) against this judge;
- `ours` : tracing-eval's default judged pack through `evaluate_all`, judge `max_concurrency` = C, C threads
  at a time (as `tracing-eval eval FILE` does);
- `ours-serial` : the same, one thread at a time (as a worker tick evaluates its claimed threads);
- `ours-unbatched` : the default pack with `judge.batch_thread_metrics` off (one call per thread metric);
- `ours-article` : the article's five metrics (completeness, knowledge retention, role adherence, turn
  relevancy, conversational flow), the ones the DeepEval run uses;
- `deepeval` : DeepEval's equivalent conversational metrics, `AsyncConfig(max_concurrent=C)`;
- `eval_lib` : eval_lib's equivalent agent metrics through `evaluate_conversations` (no concurrency setting).

The peers run in their own virtual environments under `bench/out/venvs/` (created and installed here on first
use), each from a small script that gets the threads as JSON. Achieved calls/s is the calls the judge received
divided by the client's wall time (its evaluation call only; imports, parsing and setup excluded), also as a
fraction of the limit C/L.

    .venv/bin/python bench/judge.py                                    # N=50, L=0.2 s, C=8 (about 4 min)
    .venv/bin/python bench/judge.py --threads 20 --latency 0.1 --concurrency 16 --clients ours,deepeval
    .venv/bin/python bench/judge.py --bodies                           # also keep every request and answer
    .venv/bin/python bench/judge.py --dataset synthetic:120 --threads 1   # one synthetic 120-turn thread

Network: only loopback, plus PyPI for the first install of the peers' venvs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, REPO, machine, table, write_json  # noqa: E402
from judge_server import O200K_FILE  # noqa: E402
from synthetic_threads import synthetic_thread  # noqa: E402

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
BENCH = REPO / "bench"
VENVS = OUT / "venvs"
WORK = OUT / "judge"
MODEL = "gpt-4o-mini"
#: gpt-4o-mini list prices, USD per million tokens (input, cached input, output), for the cost column only.
PRICES = (0.15, 0.075, 0.60)


@dataclass(frozen=True)
class Venv:
    name: str
    packages: tuple[str, ...]

    @property
    def python(self) -> Path:
        return VENVS / self.name / "bin" / "python"


SERVER_VENV = Venv("judge_server", ("starlette==1.10.0", "uvicorn==0.54.0", "tiktoken==0.14.0"))
PEER_VENVS = {
    "deepeval": Venv("deepeval", ("deepeval==4.3.1",)),
    "eval_lib": Venv("eval_lib", ("eval-ai-library==0.8.2",)),
}
CLIENTS = ("bare", "ours", "ours-serial", "ours-unbatched", "ours-article", "deepeval", "eval_lib")
COST_CLIENTS = ("ours", "ours-unbatched", "ours-article", "deepeval", "eval_lib")
OURS_OPTIONS = {
    "ours": [],
    "ours-serial": ["--threads-in-flight", "1"],
    "ours-unbatched": ["--batch", "off"],
    "ours-article": ["--pack", "article"],
}
TRANSPORT = {"deepeval": "openai", "eval_lib": "litellm"}  # what each peer calls the judge with

#: Which metric each kind of request belongs to (kinds come from `judge_answers.answer`).
PEER_METRICS = {
    "deepeval": [
        ("ConversationCompleteness", ("UserIntentions", "ConversationCompleteness")),
        ("KnowledgeRetention", ("Knowledge",)),
        ("RoleAdherence", ("OutOfCharacter", "RoleAdherence")),
        ("TurnRelevancy", ("TurnRelevancy",)),
        ("ConversationalGEval (flow)", ("Steps", "text:score_reason")),
    ],
    "eval_lib": [
        ("TaskSuccessRate", (":task_success",)),
        ("RepetitivePatternDetection", (":repetition",)),
        ("FailureRate", (":failure",)),
        ("ConversationalFlowRate", (":flow",)),
        ("KnowledgeRetention", (":knowledge_retention",)),
        ("RoleAdherence", (":role_adherence",)),
    ],
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- environments -----------------------------------------------------------------------------------


def ensure_venv(venv: Venv, install: bool) -> Path:
    """The venv's python, created and installed with pip on first use (or when its package list changed)."""
    marker = VENVS / venv.name / ".bench-packages"
    wanted = "\n".join(venv.packages)
    if venv.python.exists() and marker.exists() and marker.read_text() == wanted:
        return venv.python
    if not install:
        raise SystemExit(f"{venv.python} is missing or out of date; run without --no-install")
    log(f"creating {VENVS / venv.name} with {', '.join(venv.packages)} (pip, once)")
    VENVS.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(VENVS / venv.name)], check=True)
    logfile = VENVS / f"{venv.name}-install.log"
    with logfile.open("w") as f:
        done = subprocess.run(
            [str(venv.python), "-m", "pip", "install", "--disable-pip-version-check", *venv.packages],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(venv.packages)} failed; see {logfile}")
    marker.write_text(wanted)
    return venv.python


def pip_version(python: Path, package: str) -> str:
    done = subprocess.run(
        [str(python), "-m", "pip", "show", package], capture_output=True, text=True, check=False
    ).stdout
    return next((line.split(":", 1)[1].strip() for line in done.splitlines() if line.startswith("Version:")), "?")


def tiktoken_cache() -> Path | None:
    """A folder holding o200k_base's file in tiktoken's cache layout (LiteLLM ships one), if any venv has it."""
    for found in VENVS.glob(f"*/lib/python*/site-packages/litellm/litellm_core_utils/tokenizers/{O200K_FILE}"):
        return found.parent
    return None


# -- the judge server -------------------------------------------------------------------------------


class Server:
    def __init__(self, python: Path, latency: float, bodies: Path | None) -> None:
        env = dict(os.environ)
        cache = tiktoken_cache()
        if cache is not None:
            env["TIKTOKEN_CACHE_DIR"] = str(cache)
        cmd = [str(python), str(BENCH / "judge_server.py"), "--latency", str(latency), "--core", "1"]
        if bodies is not None:
            cmd += ["--bodies", str(bodies)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        if len(first) < 2 or first[0] != "PORT":
            self.proc.kill()
            raise RuntimeError(f"judge server did not start (said {first!r})")
        self.port = int(first[1])
        self.tokenizer = " ".join(first[3:])
        deadline = time.monotonic() + 15
        while True:
            try:
                self.stats()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def base_url(self, client: str) -> str:
        return f"http://127.0.0.1:{self.port}/c/{client}/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())

    def count(self, texts: list[str]) -> list[int]:
        body = json.dumps({"texts": texts}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/count", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["tokens"]

    def cpu_seconds(self) -> float:
        """utime + stime of the server process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- threads --------------------------------------------------------------------------------------


def peer_threads(dataset: Path, limit: int) -> list[dict[str, Any]]:
    """The threads as the peers take them: text of user and assistant messages, and exchanges per turn."""
    from tracing_eval.transcripts import thread_from_json_line

    out = []
    for i, line in enumerate(dataset.read_bytes().splitlines()[:limit], 1):
        thread = thread_from_json_line(line, i)
        messages = [
            {"role": m.role, "content": m.content}
            for turn in thread.turns
            for m in turn.messages
            if m.role in ("user", "assistant") and m.content.strip()
        ]
        exchanges = []
        for turn in thread.turns:
            user = "\n".join(m.content for m in turn.messages if m.role == "user" and m.content.strip())
            reply = "\n".join(m.content for m in turn.messages if m.role == "assistant" and m.content.strip())
            if user and reply:
                exchanges.append({"user": user, "assistant": reply})
        out.append(
            {
                "key": thread.key,
                "system_prompt": thread.system_prompt,
                "turns": len(thread.turns),
                "messages": messages,
                "exchanges": exchanges,
            }
        )
    return out


def reading(dataset: Path, limit: int, server: Server) -> dict[str, float]:
    """Mean tokens per thread of what the judges read: tracing-eval's transcript (and how much of it is the
    system prompt and the tool calls with their results) and the peers' user/assistant text."""
    from tracing_eval.metrics.judged.transcript import render_thread
    from tracing_eval.transcripts import thread_from_json_line

    full, no_system, no_tools, text_only = [], [], [], []
    for i, line in enumerate(dataset.read_bytes().splitlines()[:limit], 1):
        thread = thread_from_json_line(line, i)
        bare = thread.model_copy(
            update={
                "turns": [
                    t.model_copy(
                        update={
                            "messages": [
                                m.model_copy(update={"tool_calls": []}) for m in t.messages if m.role != "tool"
                            ]
                        }
                    )
                    for t in thread.turns
                ]
            }
        )
        full.append(render_thread(thread).text)
        no_system.append(render_thread(thread.model_copy(update={"system_prompt": None})).text)
        no_tools.append(render_thread(bare).text)
        text_only.append(
            "\n".join(m.content for t in thread.turns for m in t.messages if m.role in ("user", "assistant"))
        )
    counts = server.count(full + no_system + no_tools + text_only)
    n = len(full)
    mean = [statistics.mean(counts[k * n : (k + 1) * n]) for k in range(4)]
    return {
        "transcript": round(mean[0]),
        "system_prompt": round(mean[0] - mean[1]),
        "tool_calls_and_results": round(mean[0] - mean[2]),
        "user_assistant_text": round(mean[3]),
    }


def dataset_file(name: str) -> Path:
    """The dataset path; `synthetic:N` writes one synthetic thread of N turns first."""
    if not name.startswith("synthetic:"):
        return Path(name)
    turns = int(name.split(":", 1)[1])
    path = WORK / f"synthetic-{turns}.jsonl"
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(synthetic_thread(turns)) + "\n")
    return path


# -- clients --------------------------------------------------------------------------------------


def client_command(
    name: str, args: argparse.Namespace, server: Server, threads_file: Path, out: Path
) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env.update(
        {
            "OPENAI_API_KEY": "bench",
            "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
            "DEEPEVAL_NO_INSPECT_PROMPT": "1",
            "DEEPEVAL_GRPC_LOGGING": "0",
            # DeepEval cancels a metric after its own per-task timeout; on a busy machine KnowledgeRetention's
            # long chain of calls hits it, which would lose calls from the count
            "DEEPEVAL_PER_TASK_TIMEOUT_SECONDS_OVERRIDE": "1800",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_COLOR": "1",
        }
    )
    common = ["--base-url", server.base_url(name), "--out", str(out), "--core", "0"]
    if name == "bare":
        cmd = [sys.executable, str(BENCH / "judge_ours.py"), str(args.dataset), "--bare-calls", str(args.bare_calls)]
        cmd += ["--concurrency", str(args.concurrency), "--model", MODEL]
    elif name in OURS_OPTIONS:
        cmd = [sys.executable, str(BENCH / "judge_ours.py"), str(args.dataset), "--limit", str(args.threads)]
        cmd += ["--concurrency", str(args.concurrency), "--model", MODEL, *OURS_OPTIONS[name]]
    elif name == "deepeval":
        cmd = [str(PEER_VENVS[name].python), str(BENCH / "judge_deepeval.py"), str(threads_file)]
        cmd += ["--concurrency", str(args.concurrency), "--model", MODEL]
    else:
        cmd = [str(PEER_VENVS[name].python), str(BENCH / "judge_eval_lib.py"), str(threads_file)]
        cmd += ["--model", f"openai:{MODEL}"]
    return cmd + common, env


def run_client(name: str, args: argparse.Namespace, server: Server, threads_file: Path) -> dict[str, Any]:
    out = WORK / f"{name}.json"
    out.unlink(missing_ok=True)
    cmd, env = client_command(name, args, server, threads_file, out)
    logfile = WORK / f"{name}.log"
    log(f"running {name} ... (log: {logfile.relative_to(REPO)})")
    started = time.perf_counter()
    with logfile.open("w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=WORK, env=env, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or not out.exists():
        tail = logfile.read_text()[-1500:]
        log(f"{name} failed (exit {done.returncode}):\n{tail}")
        return {"failed": f"exit {done.returncode}", "log_tail": tail, "process_seconds": elapsed}
    result = json.loads(out.read_text())
    result["process_seconds"] = elapsed
    log(f"  {name}: {result['wall_seconds']:.1f} s evaluating ({elapsed:.1f} s with start-up)")
    return result


# -- figures --------------------------------------------------------------------------------------


def metric_of(client: str, kind: str) -> str:
    if client.startswith("ours"):
        kind = kind.removeprefix("schema:")
        return "thread metrics, batched" if kind == "thread_metrics" else kind
    for metric, needles in PEER_METRICS.get(client, []):
        if any(n in kind for n in needles):
            return metric
    return kind


def figures(name: str, run: dict[str, Any], served: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    n = args.threads
    limit = args.concurrency / args.latency
    calls = served.get("calls", 0)
    wall = run.get("wall_seconds") or float("nan")
    per_metric: dict[str, dict[str, float]] = {}
    for kind, k in served.get("by_kind", {}).items():
        m = per_metric.setdefault(
            metric_of(name, kind),
            {
                "calls": 0,
                "input_tokens": 0,
                "cacheable_schema_first": 0,
                "cacheable_messages_only": 0,
                "output_tokens": 0,
            },
        )
        m["calls"] += k["calls"]
        m["input_tokens"] += k["input_tokens"] + k["schema_tokens"]
        m["cacheable_schema_first"] += k["cacheable_schema_first"]
        m["cacheable_messages_only"] += k["cacheable_messages_only"]
        m["output_tokens"] += k["output_tokens"]
    return {
        "calls": calls,
        "http_errors": served.get("errors", 0),
        "wall_seconds": round(wall, 3),
        "calls_per_second": round(calls / wall, 2),
        "fraction_of_limit": round(calls / wall / limit, 3),
        "max_in_flight": served.get("max_in_flight", 0),
        "server_cpu_share": round(run.get("server_cpu_seconds", 0) / wall, 2),
        "calls_per_thread": round(calls / n, 2),
        "input_tokens_per_thread": round((served.get("input_tokens", 0) + served.get("schema_tokens", 0)) / n),
        "schema_tokens_per_thread": round(served.get("schema_tokens", 0) / n),
        "output_tokens_per_thread": round(served.get("output_tokens", 0) / n),
        "cacheable_schema_first_per_thread": round(served.get("cacheable_schema_first", 0) / n),
        "cacheable_messages_only_per_thread": round(served.get("cacheable_messages_only", 0) / n),
        "per_metric_per_thread": {
            m: {k: round(v / n, 2 if k == "calls" else 0) for k, v in d.items()}
            for m, d in sorted(per_metric.items(), key=lambda kv: -kv[1]["input_tokens"])
        },
    }


def usd(input_tokens: float, output_tokens: float, cached: float = 0) -> float:
    """USD at `PRICES`, with `cached` of the input tokens at the cached-input price."""
    return ((input_tokens - cached) * PRICES[0] + cached * PRICES[1] + output_tokens * PRICES[2]) / 1e6


def usd_per_1000_threads(f: dict[str, Any], cached: int = 0) -> float:
    return 1000 * usd(f["input_tokens_per_thread"], f["output_tokens_per_thread"], cached)


def problems(name: str, run: dict[str, Any], http_errors: int = 0) -> str:
    if "failed" in run:
        return f"run failed ({run['failed']})"
    if http_errors:
        return f"{http_errors} HTTP errors from the judge; " + problems(name, run, 0)
    if name.startswith("ours"):
        bad = {m: c for m, s in run.get("statuses", {}).items() if (c := s.get("error", 0))}
        notes = [f"{m}: {c} errors" for m, c in bad.items()]
        if run.get("judged_pack_missing"):
            notes.append("not registered yet: " + ", ".join(run["judged_pack_missing"]))
        for counter in ("reasks", "retries", "rate_limited"):
            if run["usage"].get(counter):
                notes.append(f"{run['usage'][counter]} {counter.replace('_', ' ')}")
        return "; ".join(notes) or "none"
    errors = run.get("errors") or {}
    return "; ".join(f"{m}: {c} errors" for m, c in errors.items()) or "none"


def report(
    args: argparse.Namespace, results: dict[str, Any], threads: list[dict[str, Any]], read: dict[str, float]
) -> str:
    limit = args.concurrency / args.latency
    lines = [
        f"N = {args.threads} threads, L = {args.latency:g} s, C = {args.concurrency}: limit C/L = {limit:g} calls/s",
        f"threads: {statistics.mean(t['turns'] for t in threads):.1f} turns on average, "
        f"{statistics.mean(len(t['messages']) for t in threads):.1f} user/assistant messages with text",
        f"tokens per thread: tracing-eval transcript {read['transcript']:,} (system prompt "
        f"{read['system_prompt']:,}, tool calls and results {read['tool_calls_and_results']:,}); "
        f"user/assistant text alone {read['user_assistant_text']:,}",
        "",
    ]
    rows = []
    for name, r in results.items():
        f = r.get("figures")
        if not f:
            rows.append([name, "", "", "", "", "", "", "", problems(name, r["run"])])
            continue
        rows.append(
            [
                name,
                f["calls"],
                f"{f['wall_seconds']:.1f}",
                f"{f['calls_per_second']:.1f}",
                f"{f['fraction_of_limit']:.2f}",
                f["max_in_flight"],
                f"{1000 * r['run'].get('cpu_seconds', float('nan')) / max(1, f['calls']):.1f}",
                f"{f['server_cpu_share']:.0%}",
                problems(name, r["run"], f["http_errors"]),
            ]
        )
    lines.append(
        table(
            [
                "client",
                "judge calls",
                "wall s",
                "calls/s",
                "× C/L",
                "max in flight",
                "client CPU ms/call",
                "judge server CPU",
                "errors / notes",
            ],
            rows,
        )
    )
    lines.append("")
    rows = []
    for name, r in results.items():
        f = r.get("figures")
        if f and name in COST_CLIENTS:
            inp, out = f["input_tokens_per_thread"], f["output_tokens_per_thread"]
            first, only = f["cacheable_schema_first_per_thread"], f["cacheable_messages_only_per_thread"]
            rows.append(
                [
                    name,
                    f["calls_per_thread"],
                    f"{inp:,}",
                    f"{f['schema_tokens_per_thread']:,}",
                    f"{out:,}",
                    f"{inp + out:,}",
                    f"{first:,} ({first / inp:.0%})",
                    f"{only:,} ({only / inp:.0%})",
                    f"{usd_per_1000_threads(f):.2f} / {usd_per_1000_threads(f, first):.2f}",
                ]
            )
    lines.append(
        table(
            [
                "client",
                "calls/thread",
                "input tok/thread",
                "of which schema",
                "output tok/thread",
                "total",
                "prefix-cacheable, schema first",
                "prefix-cacheable, messages only",
                "USD per 1000 threads (no cache / schema-first cache)",
            ],
            rows,
        )
    )
    for name, r in results.items():
        f = r.get("figures")
        if not f or name not in COST_CLIENTS:
            continue
        lines += ["", f"{name}, per metric and thread:"]
        rows = []
        for m, d in f["per_metric_per_thread"].items():
            cost = usd(d["input_tokens"], d["output_tokens"], d["cacheable_schema_first"])
            rows.append(
                [
                    m,
                    d["calls"],
                    f"{d['input_tokens']:,.0f}",
                    f"{d['cacheable_schema_first']:,.0f}",
                    f"{d['cacheable_messages_only']:,.0f}",
                    f"{d['output_tokens']:,.0f}",
                    f"{1000 * usd(d['input_tokens'], d['output_tokens']):.3f} / {1000 * cost:.3f}",
                ]
            )
        lines.append(
            table(
                [
                    "metric",
                    "calls",
                    "input tokens",
                    "cacheable, schema first",
                    "cacheable, messages only",
                    "output tokens",
                    "USD per 1000 threads (no cache / schema-first cache)",
                ],
                rows,
            )
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=50, help="N: first N threads of the dataset")
    ap.add_argument("--latency", type=float, default=0.2, help="L: seconds per judge call")
    ap.add_argument("--concurrency", type=int, default=8, help="C: judge concurrency cap")
    ap.add_argument("--bare-calls", type=int, default=400, help="calls of the bare-client ceiling run")
    ap.add_argument(
        "--dataset", default=str(DATASETS / "tau_airline_gpt4o.jsonl"), help="a JSON-lines file, or synthetic:TURNS"
    )
    ap.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated subset of {', '.join(CLIENTS)}")
    ap.add_argument("--no-install", action="store_true", help="fail instead of creating the peers' venvs")
    ap.add_argument("--bodies", action="store_true", help="keep every request and answer in bench/out/judge/bodies")
    ap.add_argument("--json", default="judge.json", help="file name under bench/out")
    args = ap.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        ap.error(f"unknown client(s): {', '.join(sorted(unknown))}")

    WORK.mkdir(parents=True, exist_ok=True)
    args.dataset = dataset_file(args.dataset)
    versions: dict[str, str] = {}
    server_python = ensure_venv(SERVER_VENV, not args.no_install)
    available: list[str] = []
    unavailable: dict[str, Any] = {}
    for name in clients:
        peer = PEER_VENVS.get(name)
        if peer is None:
            available.append(name)
            continue
        try:
            python = ensure_venv(peer, not args.no_install)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            log(f"{name}: cannot set up its venv: {exc}")
            unavailable[name] = {"run": {"failed": f"venv setup: {exc}"}}
            continue
        available.append(name)
        versions[name] = pip_version(python, peer.packages[0].split("==")[0])
        versions[f"{name}: {TRANSPORT[name]}"] = pip_version(python, TRANSPORT[name])
    versions["openai (ours)"] = pip_version(Path(sys.executable), "openai")
    if tiktoken_cache() is None and not args.no_install:
        # o200k_base's file comes with LiteLLM in eval_lib's venv; without it every client's tokens would be
        # counted with the regex fallback, which the published figures are not
        log("no o200k_base file for the token counts: setting up eval_lib's venv, which has one")
        ensure_venv(PEER_VENVS["eval_lib"], True)

    threads = peer_threads(args.dataset, args.threads)
    args.threads = len(threads)
    threads_file = WORK / f"threads-{args.threads}.json"
    threads_file.write_text(json.dumps(threads))

    bodies = WORK / "bodies" if args.bodies else None
    if bodies is not None:
        for old in bodies.glob("*.jsonl"):
            old.unlink()
    server = Server(server_python, args.latency, bodies)
    log(f"judge server on port {server.port}, L = {args.latency:g} s, tokens: {server.tokenizer}")
    results: dict[str, Any] = dict(unavailable)
    try:
        read = reading(args.dataset, args.threads, server)
        for name in available:
            server_cpu = server.cpu_seconds()
            run = run_client(name, args, server, threads_file)
            run["server_cpu_seconds"] = server.cpu_seconds() - server_cpu
            served = server.stats()["clients"].get(name, {})
            results[name] = {"run": run, "served": served}
            if "failed" not in run:
                results[name]["figures"] = figures(name, run, served, args)
        overall = server.stats()
    finally:
        server.stop()

    text = report(args, results, threads, read)
    print(text)
    path = write_json(
        args.json,
        {
            "machine": machine(),
            "params": {
                "threads": args.threads,
                "latency": args.latency,
                "concurrency": args.concurrency,
                "dataset": args.dataset.name,
                "model_name_sent": MODEL,
            },
            "tokenizer": overall.get("tokenizer"),
            "tokens_read_per_thread": read,
            "versions": versions,
            "results": results,
            "report": text,
        },
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
