"""The LLM layer against endpoints that behave like real ones do (a loopback stand-in, tests/openai_standin.py): a reasoning
model's parameter rules, a server that answers json_schema with HTTP 500, empty / HTML / cut replies, a closed port, a
wrong model name, another server serving the same model name, an optional key; and a hostile or broken endpoint: a key quoted
back, a reply dripped a byte at a time, Retry-After, a redirect to another host, a reply far past its token limit, a
certificate the client cannot verify; a disk that refuses a cache write, a cut ledger."""
import time

import pytest

from fanin.core.config import compose, instantiate
from fanin.models.llm import LLM, EndpointError, Ledger, LLMError, reply_bound
from fanin.models.llm_cache import read_ledger
from fanin.models.local_models import free_port
from openai_standin import StandIn, self_signed

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


# ---------------------------------------------------------------- a hostile or broken endpoint
Q2 = [{"role": "user", "content": "Which river runs through Paris?"}]
SK_KEY = "sk-lab-test-0123456789abcdef"
TOKEN = "gateway-token-7f3a9c2e1d55"   # not shaped like a key: only the configured variable says it is one


def _stored(tmp_path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.glob("llm.sqlite*"))


@pytest.mark.parametrize("env,value,provider", [("OPENAI_API_KEY", SK_KEY, "openai"), ("LAB_GATEWAY_TOKEN", TOKEN, "vllm")])
def test_a_key_the_endpoint_quotes_back_is_never_raised_returned_or_cached(tmp_path, monkeypatch, env, value, provider):
    monkeypatch.setenv(env, value)
    with StandIn(echo_key="error") as s:   # the preflight's probe is refused with the key quoted
        with pytest.raises(EndpointError) as e:
            _llm(s, tmp_path, provider=provider, api_key_env=env).chat(Q)
        assert s.auths[-1] == f"Bearer {value}", "the stand-in did not receive the key it should quote"
        assert value not in str(e.value) and "[redacted]" in str(e.value) and "HTTP 400" in str(e.value)
    with StandIn(echo_key="error", echo_after=1) as s:   # a call after the preflight: the failure a stage records
        with pytest.raises(LLMError) as e:
            _llm(s, tmp_path, provider=provider, api_key_env=env, max_retries=0).chat(Q)
        assert value not in e.value.reason and value not in str(e.value) and "[redacted]" in e.value.reason
    with StandIn(echo_key="reply") as s:   # a reply text that quotes it: neither returned nor cached
        r = _llm(s, tmp_path, provider=provider, api_key_env=env).chat(Q)
        assert value not in r.text and r.text.endswith("(you called with [redacted])")
        assert value.encode() not in _stored(tmp_path)


def test_a_dripped_reply_is_bounded_by_timeout_s_as_a_whole(tmp_path):
    with StandIn(drip_s=1.0, drip_after=1) as s:   # the preflight is answered; every call after drips a byte a second
        llm = _llm(s, tmp_path, timeout_s=3, max_retries=0)
        t0 = time.perf_counter()
        with pytest.raises(LLMError, match=r"timed out after 3 s \(timeout_s\)") as e:
            llm.chat(Q)
        assert time.perf_counter() - t0 < 6, "a reply dripped a byte a second held the call past timeout_s"
        assert "127.0.0.1" in str(e.value) and llm.ledger.totals()["failures"] == 1
    with StandIn(drip_s=1.0) as s:   # the preflight's own probe drips
        t0 = time.perf_counter()
        with pytest.raises(EndpointError, match=r"does not answer.*timed out after 2 s \(preflight_timeout_s\)"):
            _llm(s, tmp_path, preflight_timeout_s=2).chat(Q)
        assert time.perf_counter() - t0 < 5


def test_retry_after_is_waited_at_the_preflight_and_in_calls_up_to_its_cap(tmp_path):
    with StandIn(statuses=[(429, {"Retry-After": "1"})]) as s:   # the preflight's probe is rate-limited once
        llm = _llm(s, tmp_path, max_retries=1)
        t0 = time.perf_counter()
        assert llm.chat(Q).text and time.perf_counter() - t0 >= 1.0
        s.statuses.append((503, {"Retry-After": "1"}))   # then a call
        t0 = time.perf_counter()
        assert llm.chat(Q2).text and time.perf_counter() - t0 >= 1.0, "backoff_s=0.01 was used, not Retry-After"
        assert llm.ledger.totals()["retries"] == 1
    with StandIn(statuses=[(429, {"Retry-After": "3600"})]) as s:
        t0 = time.perf_counter()
        with pytest.raises(EndpointError, match=r"asks to wait 3600 s .*retry_after_cap_s=60"):
            _llm(s, tmp_path).chat(Q)
        assert time.perf_counter() - t0 < 5


def test_a_redirect_to_another_host_is_refused_naming_both(tmp_path):
    with StandIn(reply=lambda b: "from the other host") as other, StandIn(redirect_to=f"http://localhost:{other.port}") as s:
        with pytest.raises(EndpointError) as e:
            _llm(s, tmp_path).chat(Q)
        msg = str(e.value)
        assert f"127.0.0.1:{s.port}" in msg and f"localhost:{other.port}" in msg and "\n" not in msg
        with pytest.raises(LLMError, match=rf"redirects .*localhost:{other.port}"):   # also without a preflight
            _llm(s, tmp_path, preflight=False).chat(Q)
        assert other.requests == [], "a request reached the other host"


def test_a_reply_far_past_its_token_limit_is_cut_flagged_and_counted(tmp_path):
    with StandIn(reply=lambda b: "word " * 2_000_000) as s:   # 10 MB for max_tokens=512
        llm = _llm(s, tmp_path, max_tokens=512)
        r = llm.chat(Q)
        assert r.cut and len(r.text) == reply_bound(512) and llm.ledger.totals()["oversized"] == 1
        assert len(_stored(tmp_path)) < 1_000_000, "the 10 MB reply was stored whole"
        again = _llm(s, tmp_path, max_tokens=512).chat(Q)
        assert again.cached and again.cut and again.text == r.text
        with pytest.raises(LLMError, match=r"max_reply_bytes"):   # past max_reply_bytes the body is not read at all
            _llm(s, tmp_path, max_tokens=512, max_reply_bytes=1 << 20, preflight=False, max_retries=0).chat(Q2)


def test_a_certificate_the_client_cannot_verify_is_named_with_its_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    cert, key = self_signed(tmp_path / "tls")
    with StandIn(tls=(cert, key)) as s:
        with pytest.raises(EndpointError) as e:
            _llm(s, tmp_path).chat(Q)
        msg = str(e.value)
        assert "certificate" in msg and "self-signed" in msg and "SSL_CERT_FILE" in msg and "\n" not in msg
        with pytest.raises(LLMError, match="SSL_CERT_FILE"):   # a call without a preflight says the same, unretried
            (llm := _llm(s, tmp_path, preflight=False, max_retries=3, backoff_s=2.0)).chat(Q)
        assert llm.ledger.totals()["retries"] == 0
        monkeypatch.setenv("SSL_CERT_FILE", cert)   # the fix the message names
        assert _llm(s, tmp_path).chat(Q).text


def test_a_full_disk_at_a_cache_write_keeps_the_reply_and_every_stored_reply(tmp_path, capsys):
    with StandIn(reply=lambda b: "a long answer " * 2000) as s:
        llm = _llm(s, tmp_path)
        assert not llm.chat(Q).cached
        c = llm.cache._conn()
        c.execute(f"PRAGMA max_page_count = {c.execute('PRAGMA page_count').fetchone()[0]}")   # SQLite: "database or disk is full"
        capsys.readouterr()
        r = llm.chat(Q2)
        assert r.text.startswith("a long answer") and not r.cached
        err = capsys.readouterr().err
        assert "could not be stored" in err and "disk is full" in err and err.count("\n") == 1
        assert llm.ledger.totals()["unstored"] == 1 and llm.cache.unstored == 1
        assert not list(tmp_path.glob("llm.sqlite.damaged-*")), "a full disk was taken for a damaged cache"
        fresh = _llm(s, tmp_path)
        assert fresh.chat(Q).cached and len(fresh.cache) == 1


def test_the_ledger_is_written_whole_and_a_cut_one_is_one_line(tmp_path):
    led = Ledger()
    led.add("answer", "bm25", requests=2, calls=1, cache_hits=1, oversized=1)
    path = led.write(tmp_path / "ledger.json")
    assert read_ledger(path)["oversized"] == 1 and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    path.write_text(path.read_text()[:30])
    with pytest.raises(LLMError) as e:
        read_ledger(path)
    assert str(path) in str(e.value) and "damaged" in str(e.value) and "\n" not in str(e.value)


def test_embeddings_from_an_endpoint_keep_keys_out_of_errors_and_refuse_another_host(tmp_path, monkeypatch):
    from fanin.models.endpoint_embeddings import OpenAICompatibleEmbedder
    monkeypatch.setenv("LAB_GATEWAY_TOKEN", TOKEN)
    with StandIn(echo_key="error") as s:
        url = s.base_url.replace("://", "://lab:url-secret-1234@")   # a key written into the URL, too
        emb = OpenAICompatibleEmbedder(url, "m", api_key_env="LAB_GATEWAY_TOKEN", max_retries=0)
        with pytest.raises(EndpointError) as e:
            emb.encode(["a text"])
        assert s.auths[-1] == "Basic bGFiOnVybC1zZWNyZXQtMTIzNA==", "the stand-in did not receive the URL's credentials"
        msg = str(e.value)
        assert "url-secret-1234" not in msg and "bGFiOnVybC1zZWNyZXQtMTIzNA==" not in msg and "[redacted]" in msg
    with StandIn(echo_key="error") as s:
        emb = OpenAICompatibleEmbedder(s.base_url, "m", api_key_env="LAB_GATEWAY_TOKEN", max_retries=0)
        with pytest.raises(EndpointError) as e:
            emb.encode(["a text"])
        assert s.auths[-1] == f"Bearer {TOKEN}" and TOKEN not in str(e.value) and "[redacted]" in str(e.value)
    with StandIn() as other, StandIn(redirect_to=f"http://localhost:{other.port}") as s:
        with pytest.raises(EndpointError, match=rf"127\.0\.0\.1:{s.port} redirects .*localhost:{other.port}"):
            OpenAICompatibleEmbedder(s.base_url, "m", max_retries=0).encode(["a text"])
        assert other.requests == []
