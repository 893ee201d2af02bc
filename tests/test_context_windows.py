"""A model's context window without configuration: reported by the server (vLLM's `max_model_len`), else the lab's table of
well-known models (`configs/context_windows.yaml`), else the run stops before any work naming the setting that fixes it."""
import json

import pytest

from fanin.core.config import ConfigError
from fanin.run.pipeline import run
from openai_standin import StandIn


def _ov(tiny_overrides, s, role="reader_llm", provider="vllm"):
    return tiny_overrides + ["system=bm25", "answer.per_domain_type=1", "answer.check_judges=false", "answer.judges=[keyfact]",
                             f"{role}={provider}", f"{role}.base_url={s.base_url}", f"{role}.model={s.model}"]


def _all_answered(folder):
    rows = [json.loads(l) for l in (next(folder.glob("answers-*")) / "answers.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows)


def test_a_window_the_server_reports_is_used(tiny_overrides):
    with StandIn(model="served-7b", max_model_len=4096, reply=lambda b: "Tower 1 was completed in 1911.") as s:
        (folder,) = run(_ov(tiny_overrides, s), stages=["index", "retrieve", "evaluate", "answer", "judge"])
    _all_answered(folder)


def test_a_well_known_model_needs_no_window(tiny_overrides, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with StandIn(model="gpt-5-mini", reply=lambda b: "Tower 1 was completed in 1911.") as s:   # reports no window
        (folder,) = run(_ov(tiny_overrides, s, provider="openai"), stages=["index", "retrieve", "evaluate", "answer", "judge"])
    _all_answered(folder)


def test_an_unknown_window_stops_before_any_work(tiny_overrides):
    out = [o for o in tiny_overrides if o.startswith("paths.outputs=")][0].split("=", 1)[1]
    with StandIn(model="my-finetune") as s:
        with pytest.raises(ConfigError, match=r"reader_llm.context_tokens: the context window of 'my-finetune' is unknown.*"
                                              r"set reader_llm.context_tokens="):
            run(_ov(tiny_overrides, s), stages=["index", "retrieve", "evaluate", "answer"])
        assert len(s.requests) <= 2   # the preflight's probe at most: no reader call
    from pathlib import Path
    assert not list((Path(out) / "index").glob("**/*.faiss")) and not list(Path(out).glob("test/*/metrics.csv"))
