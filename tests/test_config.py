"""Settings: file, environment, defaults, and clear errors for mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tracing_eval.config import ConfigError, Settings, load_settings


def test_defaults_need_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.store.url == "sqlite+aiosqlite:///tracing-eval.db"
    assert s.http.address == "127.0.0.1:4318"
    assert (s.schedule.turn_settle_seconds, s.schedule.thread_idle_seconds) == (60.0, 300.0)
    assert "response_hygiene" in s.metrics.enabled


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[store]\nurl = "sqlite+aiosqlite:///from-file.db"\n[schedule]\ntick_seconds = 3\n')
    monkeypatch.setenv("TRACING_EVAL_SCHEDULE__TICK_SECONDS", "7")
    monkeypatch.setenv("TRACING_EVAL_METRICS__THRESHOLDS", '{"repetition": 0.9}')
    s = load_settings(cfg)
    assert s.store.url.endswith("from-file.db")
    assert s.schedule.tick_seconds == 7
    assert s.metrics.thresholds == {"repetition": 0.9}


def test_working_folder_file_is_read_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracing-eval.toml").write_text('[http]\naddress = "0.0.0.0:9999"\n')
    assert load_settings().http.port == 9999


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            "[schedule]\ntick_secnds = 3\n",
            ["schedule.tick_secnds", "unknown key", "TRACING_EVAL_SCHEDULE__TICK_SECNDS"],
        ),
        ("[metrics.thresholds]\nrepetition = 1.5\n", ["metrics.thresholds", "within [0, 1]"]),
        ('[http]\naddress = "localhost"\n', ["http.address", "HOST:PORT"]),
        ("[schedule]\ntick_seconds = -1\n", ["schedule.tick_seconds", "greater than 0"]),
        ("[store\nurl=1", ["not valid TOML"]),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, text: str, needles: list[str]) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg)
    for needle in needles:
        assert needle in str(exc.value)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_example_config_documents_every_key_with_its_default() -> None:
    text = (REPO / "config.example.toml").read_text()

    def keys(model: dict[str, object], prefix: str) -> list[tuple[str, str]]:
        out = []
        for key, value in model.items():
            out.append((prefix, key))
            if isinstance(value, dict) and f"[{prefix}.{key}]" in text:
                out += keys(value, f"{prefix}.{key}")
        return out

    for section, fields in Settings().model_dump().items():
        for where, key in keys(fields, section):
            documented = f"{key} =" in text or f"[{where}.{key}]" in text
            assert documented, f"config.example.toml does not document [{where}] {key}"
    assert load_settings(REPO / "config.example.toml").model_dump() == Settings().model_dump()


def test_unknown_environment_sections_and_blank_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACING_EVAL_RECEIVER__AUTH_TOKEN", "")
    assert load_settings().receiver.auth_token is None  # blank means unset, not "require an empty token"
    monkeypatch.setenv("TRACING_EVAL_JUDGE_MODEL", "gpt-4o-mini")  # one underscore: no such section
    with pytest.raises(ConfigError, match="TRACING_EVAL_JUDGE_MODEL"):
        load_settings()


def test_a_malformed_json_value_in_the_environment_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`TRACING_EVAL_SINKS__WEBHOOK__URLS='[oops'` used to end in a SettingsError traceback."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACING_EVAL_SINKS__WEBHOOK__URLS", "[oops")
    with pytest.raises(
        ConfigError, match="invalid configuration \\(environment\\).*Lists and tables in the environment are JSON"
    ):
        load_settings()
