"""The exported DeepEval and RAGAS files load in those libraries, each in a venv of its own.

    .venv/bin/python bench/interop.py                   # export, then load in deepeval and ragas
    .venv/bin/python bench/interop.py --write-schemas   # also refresh tests/data/interop/*.schema.json

Scenarios come from the bundled examples the way a user gets them: `run --once` scores the OTLP
example files into a temporary store, and `scenarios export --format deepeval` / `--format ragas`
write the files. Each library then loads its file with its own loader
(`EvaluationDataset.add_goldens_from_json_file`, `ragas.EvaluationDataset.from_jsonl`) and the
fields are checked against the scenario file. `--write-schemas` saves the libraries' own JSON schemas
of `ConversationalGolden` and `MultiTurnSample`, which tests/test_scenarios.py validates every
export against. The venvs are created under bench/out/venvs with pip on first use.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO  # noqa: E402
from judge import Venv, ensure_venv, pip_version  # noqa: E402

SCHEMAS = REPO / "tests" / "data" / "interop"
DEEPEVAL = Venv("deepeval", ("deepeval==4.3.1",))
# ragas 0.4.3 imports a chat model that langchain-community 0.4.2 removed
RAGAS = Venv("ragas", ("ragas==0.4.3", "langchain-community==0.4.1"))
EXAMPLES = ["examples/otel-genai.otlp.jsonl", "examples/openinference.otlp.jsonl"]

DEEPEVAL_CHECK = """
import json, sys, warnings
warnings.simplefilter("ignore")
from deepeval.dataset import ConversationalGolden, EvaluationDataset
path, scenarios, schema_out = sys.argv[1], sys.argv[2], sys.argv[3]
dataset = EvaluationDataset()
dataset.add_goldens_from_json_file(path)
expected = [json.loads(x) for x in open(scenarios)]
assert len(dataset.goldens) == len(expected), (len(dataset.goldens), len(expected))
for golden, s in zip(dataset.goldens, expected):
    assert isinstance(golden, ConversationalGolden)
    assert golden.name == s["id"] and golden.scenario == s["goal"] and golden.expected_outcome == s["expected_outcome"]
    described = golden.user_description or (golden.persona.characteristics if golden.persona else None)
    assert described == s["persona"], described
    assert golden.additional_metadata["scenario_id"] == s["id"]
if schema_out != "-":
    open(schema_out, "w").write(json.dumps(ConversationalGolden.model_json_schema(), indent=1, sort_keys=True) + "\\n")
print(f"deepeval loaded {len(dataset.goldens)} ConversationalGolden rows")
"""

RAGAS_CHECK = """
import json, sys, warnings
warnings.simplefilter("ignore")
from ragas import EvaluationDataset
from ragas.dataset_schema import MultiTurnSample
from ragas.messages import AIMessage, HumanMessage, ToolMessage
path, scenarios, schema_out = sys.argv[1], sys.argv[2], sys.argv[3]
dataset = EvaluationDataset.from_jsonl(path)
expected = [json.loads(x) for x in open(scenarios)]
assert dataset.is_multi_turn() and len(dataset) == len(expected)
kinds = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool"}
for sample, s in zip(dataset.samples, expected):
    assert isinstance(sample, MultiTurnSample) and sample.reference == s["expected_outcome"]
    users = [m.content for m in sample.user_input if isinstance(m, HumanMessage)]
    assert users == [m["content"] for m in s["transcript"] if m["role"] == "user"]
    calls = sum(len(m.tool_calls or []) for m in sample.user_input if isinstance(m, AIMessage))
    assert calls == sum(len(m.get("tool_calls") or []) for m in s["transcript"]), calls
if schema_out != "-":
    open(schema_out, "w").write(json.dumps(MultiTurnSample.model_json_schema(), indent=1, sort_keys=True) + "\\n")
print(f"ragas loaded {len(dataset)} MultiTurnSample rows ({sum(len(s.user_input) for s in dataset.samples)} messages)")
"""


def cli(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "tracing-eval"), *args], cwd=cwd, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"tracing-eval {' '.join(args)} failed:\n{done.stderr}")
    return done.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-schemas", action="store_true", help="refresh tests/data/interop/*.schema.json")
    ap.add_argument("--no-install", action="store_true", help="fail instead of creating the venvs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cli("run", "--once", *(f"--source=otlp-file:{REPO / f}" for f in EXAMPLES), cwd=work)
        for fmt, name in (("scenarios", "scenarios.jsonl"), ("deepeval", "goldens.json"), ("ragas", "samples.jsonl")):
            print(cli("scenarios", "export", "--format", fmt, "--out", name, cwd=work))
        for venv, script, name, schema in (
            (DEEPEVAL, DEEPEVAL_CHECK, "goldens.json", "deepeval_conversational_golden.schema.json"),
            (RAGAS, RAGAS_CHECK, "samples.jsonl", "ragas_multi_turn_sample.schema.json"),
        ):
            python = ensure_venv(venv, not args.no_install)
            target = str(SCHEMAS / schema) if args.write_schemas else "-"
            SCHEMAS.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                [str(python), "-c", script, name, "scenarios.jsonl", target], cwd=work, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise SystemExit(f"{venv.name} could not load {name}:\n{done.stderr}")
            version = pip_version(python, venv.packages[0].split("==")[0])
            print(f"{venv.packages[0].split('==')[0]} {version}: {done.stdout.strip()}")


if __name__ == "__main__":
    main()
