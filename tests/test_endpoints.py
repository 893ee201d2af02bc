"""The LLM layer against endpoints that behave like real ones do (a loopback stand-in, tests/openai_standin.py): a reasoning
model's parameter rules, a server that answers json_schema with HTTP 500, empty / HTML / cut replies, a closed port, a
wrong model name, another server serving the same model name, and an optional key."""
import json
import time

import pytest

from fanin.config import compose, instantiate
from fanin.llm import LLM, EndpointError, LLMError
from fanin.local_models import free_port
from openai_standin import StandIn

SCHEMA = {"type": "object", "properties": {"correct": {"type": "boolean"}}, "required": ["correct"]}
Q = [{"role": "user", "content": "Is Paris the capital of France? Reply in JSON."}]


def _llm(s, tmp_path, **kw):
    kw = {"provider": "vllm", "base_url": s.base_url, "model": s.model, "cache_path": tmp_path / "llm.sqlite",
          "max_retries": 1, "backoff_s": 0.01, **kw}
    return LLM(**kw)


def test_reasoning_model_parameters_are_negotiated(tmp_path):
    with StandIn(reasoning=True) as s:
        llm = _llm(s, tmp_path, temperature=0.0, max_tokens=64)
        r = llm.chat(Q, schema=SCHEMA, prompt_version="t@v1")
        assert r.parsed == {"correct": True, "reason": "stand-in", "ok": True} or r.parsed["correct"] is True
        last = s.chats()[-1]
        assert "temperature" not in last and "max_tokens" not in last and last["max_completion_tokens"] == 64
        assert llm.negotiated()["token_param"] == "max_completion_tokens" and "temperature" in llm.negotiated()["dropped"]
        n = len(s.chats())
        assert _llm(s, tmp_path, temperature=0.0, max_tokens=64).chat(Q, schema=SCHEMA, prompt_version="t@v1").cached
        assert len(s.chats()) == n, "a cached reply went to the server again"


def test_json_schema_rejected_falls_back_to_the_grammar(tmp_path):
    with StandIn(no_json_schema=True) as s:
        llm = _llm(s, tmp_path, structured="auto")
        r = llm.chat(Q, schema=SCHEMA, prompt_version="t@v1")
        assert r.parsed["correct"] is True and llm.negotiated()["structured"] == "json_object_schema"
        assert s.chats()[-1]["response_format"]["type"] == "json_object"
    with StandIn(no_json_schema=True) as s:   # a config that insists on json_schema fails fast, naming the endpoint
        llm = _llm(s, tmp_path, structured="json_schema")
        with pytest.raises(EndpointError, match=r"127\.0\.0\.1.*structured=json_schema"):
            llm.chat(Q, schema=SCHEMA)


@pytest.mark.parametrize("fault,reason", [("no_choices", "no choices"), ("null_content", "content is null"),
                                          ("html", "not a chat completion")])
def test_empty_and_non_json_replies_are_failures_never_cached(tmp_path, fault, reason):
    with StandIn(fault=fault) as bad:
        llm = _llm(bad, tmp_path, preflight=False)
        with pytest.raises(LLMError, match=reason):
            llm.chat(Q, prompt_version="t@v1")
        assert len(llm.cache) == 0 and llm.ledger.totals()["failures"] == 1
        bad.fault = None   # the server heals: the rerun calls again and gets a real reply
        r = _llm(bad, tmp_path, preflight=False).chat(Q, prompt_version="t@v1")
        assert not r.cached and r.text and len(llm.cache) == 1


def test_cut_reply_is_flagged_and_keeps_its_finish_reason(tmp_path):
    with StandIn(fault="cut") as s:
        r = _llm(s, tmp_path).chat(Q, prompt_version="t@v1")
        assert r.cut and r.finish_reason == "length"
        again = _llm(s, tmp_path).chat(Q, prompt_version="t@v1")
        assert again.cached and again.cut


def test_closed_port_fails_fast_naming_url_and_model(tmp_path):
    port = free_port()
    llm = LLM(provider="vllm", base_url=f"http://127.0.0.1:{port}/v1", model="m", cache_path=tmp_path / "c.sqlite",
              max_retries=5, backoff_s=2.0)
    t0 = time.perf_counter()
    with pytest.raises(EndpointError, match=rf"127\.0\.0\.1:{port}.*'m'.*does not answer"):
        llm.chat(Q)
    with pytest.raises(EndpointError):   # remembered: no second wait
        llm.chat(Q)
    assert time.perf_counter() - t0 < 10


def test_wrong_model_name_is_refused_by_the_preflight(tmp_path):
    with StandIn(model="served-model") as s:
        llm = LLM(provider="vllm", base_url=s.base_url, model="other", cache_path=tmp_path / "c.sqlite")
        with pytest.raises(EndpointError, match="served-model"):
            llm.chat(Q)


def test_cache_key_includes_the_endpoint(tmp_path):
    with StandIn(reply=lambda b: "from A") as a, StandIn(reply=lambda b: "from B") as b:
        ra = _llm(a, tmp_path).chat(Q)
        rb = _llm(b, tmp_path).chat(Q)   # same model name, same cache file, another server
        assert ra.text == "from A" and rb.text == "from B" and not rb.cached


def test_optional_key_is_optional_and_required_key_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with StandIn() as s:
        cfg = compose(["llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}"])
        llm = instantiate(cfg.llm, cache_path=str(tmp_path / "c.sqlite"))
        assert llm.chat(Q).text
        cfg = compose(["llm=openai", f"llm.base_url={s.base_url}", f"llm.model={s.model}"])
        with pytest.raises(EndpointError, match="OPENAI_API_KEY"):
            instantiate(cfg.llm, cache_path=str(tmp_path / "c.sqlite")).chat(Q)


def test_a_non_json_reply_at_preflight_says_so_not_http_none(tmp_path):
    with StandIn(fault="bad_json") as bad:
        llm = _llm(bad, tmp_path)
        with pytest.raises((EndpointError, LLMError)) as e:
            llm.chat(Q, prompt_version="t@v1")
        assert "HTTP None" not in str(e.value)
