"""The peers' gateway (fanin.systems.gateway) driven by the official `openai` client, as a peer package would drive it: chat and
embeddings through the lab's caches, replays that never reach the model server, the per-session token, the real key never
returned, streaming, upstream failures as 5xx errors with their reason, and ledger counts per stage. The model server is the
loopback stand-in (tests/openai_standin.py); the embedder is the lab's OnnxMiniLM."""
import json
import socket
import time
from contextlib import contextmanager

import httpx
import numpy as np
import openai
import pytest

from fanin.core.config import compose, resolve_path
from fanin.systems.gateway import Gateway, gateway_from_config
from fanin.models.llm import LLM, LLMError
from fanin.models.local_models import free_port
from openai_standin import StandIn

Q = [{"role": "user", "content": "What is the capital of France?"}]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture(scope="module")
def embedder():
    from fanin.models.embeddings import OnnxMiniLM
    return OnnxMiniLM(threads=1)


def _llm(base_url, model, tmp_path, **kw):
    return LLM(**{"provider": "vllm", "base_url": base_url, "model": model, "cache_path": tmp_path / "llm.sqlite",
                  "max_retries": 1, "backoff_s": 0.01, **kw})


@contextmanager
def served(tmp_path, embedder=None, standin=None, llm_kw=None, **gw_kw):
    with StandIn(**(standin or {})) as s:
        llm = _llm(s.base_url, s.model, tmp_path, **(llm_kw or {}))
        with Gateway(llm, embedder, tmp_path / "emb.sqlite", **gw_kw) as gw:
            yield s, llm, gw


def _auth(gw): return {"Authorization": f"Bearer {gw.token}"}


def test_chat_is_cached_counted_and_replayed_at_zero_cost(tmp_path):
    with served(tmp_path) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.url_for("index", system="peerA"), api_key=gw.token)
        assert gw.url_for("index", system="peerA").endswith("/system/peerA/stage/index/v1")
        assert [m.id for m in peer.models.list()] == [s.model]
        first = peer.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=Q)
        c = first.parse()
        assert first.headers["x-fanin-cache"] == "miss" and c.object == "chat.completion"
        assert c.choices[0].message.content == "Paris." and c.choices[0].finish_reason == "stop"
        assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (11, 7, 18) and c.model == s.model
        n = len(s.chats())   # the LLM's preflight probe and the call
        again = peer.chat.completions.with_raw_response.create(model="anything", messages=Q)
        assert again.headers["x-fanin-cache"] == "hit" and again.parse().choices[0].message.content == "Paris."
        assert len(s.chats()) == n == 2, "a repeated request reached the model server"
        row = gw.usage("index", "peerA")
        assert (row["requests"], row["calls"], row["cache_hits"], row["cache_misses"]) == (2, 1, 1, 1)
        assert (row["prompt_tokens"], row["replayed_prompt_tokens"], row["chat_requests"]) == (11, 11, 2)
    # a rerun (new LLM, new gateway, same cache file and endpoint) replays the whole "build": the server is gone, nothing is asked
    llm = _llm(s.base_url, s.model, tmp_path)
    with Gateway(llm, None, None) as gw:
        r = openai.OpenAI(base_url=gw.url_for("index", system="peerA"), api_key=gw.token).chat.completions.create(model="x", messages=Q)
        assert r.choices[0].message.content == "Paris." and r.usage.total_tokens == 18
        assert (gw.usage()["calls"], gw.usage()["cache_hits"], gw.usage()["failures"]) == (0, 1, 0)


def test_streaming_replies_are_the_cached_reply(tmp_path):
    with served(tmp_path) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.base_url, api_key=gw.token)
        full = peer.chat.completions.create(model="x", messages=Q).choices[0].message.content
        chunks = list(peer.chat.completions.create(model="x", messages=Q, stream=True, stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == full
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].usage.total_tokens == 18 and all(c.object == "chat.completion.chunk" for c in chunks)
        # a first request that streams is served (and cached) too
        q2 = [{"role": "user", "content": "Another question?"}]
        text = "".join(c.choices[0].delta.content or "" for c in peer.chat.completions.create(model="x", messages=q2, stream=True) if c.choices)
        assert text == "Paris." and peer.chat.completions.with_raw_response.create(model="x", messages=q2).headers["x-fanin-cache"] == "hit"
        raw = httpx.post(f"{gw.base_url}/chat/completions", headers=_auth(gw), json={"messages": Q, "stream": True})
        assert raw.headers["content-type"].startswith("text/event-stream") and raw.text.rstrip().endswith("data: [DONE]")


def test_parameters_and_structured_output_pass_through(tmp_path):
    with served(tmp_path) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.base_url, api_key=gw.token)
        r = peer.chat.completions.create(model="x", messages=Q, temperature=0.3, max_completion_tokens=33, stop=["\n\n"], seed=7,
                                         response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": SCHEMA}})
        assert json.loads(r.choices[0].message.content)["ok"] is True
        sent = s.chats()[-1]
        assert (sent["temperature"], sent["max_tokens"], sent["stop"], sent["seed"]) == (0.3, 33, ["\n\n"], 7)
        assert sent["response_format"]["json_schema"]["schema"] == SCHEMA and sent["response_format"]["json_schema"]["name"] == "verdict"
        r = peer.chat.completions.create(model="x", messages=Q, max_tokens=21, response_format={"type": "json_object"})
        assert json.loads(r.choices[0].message.content)["ok"] is True and s.chats()[-1]["max_tokens"] == 21
        for bad in ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, {"n": 2}):
            with pytest.raises(openai.BadRequestError):
                peer.chat.completions.create(model="x", messages=Q, **bad)
        r = httpx.post(f"{gw.base_url}/chat/completions", headers=_auth(gw), content=b"{not json")
        assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
        r = httpx.get(f"{gw.root}/v1/nowhere", headers=_auth(gw))
        assert r.status_code == 404 and "error" in r.json()
    with served(tmp_path / "b", max_tokens=99, overrides={"temperature": 0.0}) as (s, llm, gw):
        openai.OpenAI(base_url=gw.base_url, api_key=gw.token).chat.completions.create(model="x", messages=Q, temperature=0.9)
        assert (s.chats()[-1]["max_tokens"], s.chats()[-1]["temperature"]) == (99, 0.0)


def test_embeddings_go_through_the_lab_embedder_and_its_cache(tmp_path, embedder):
    texts = ["The cat sat on the mat.", "Paris is the capital of France.", "The cat sat on the mat."]
    with served(tmp_path, embedder) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.url_for("index", system="peerA"), api_key=gw.token)
        assert {"id": embedder.name, "dimensions": 384}.items() <= {m.id: m.model_dump() for m in peer.models.list()}[embedder.name].items()
        raw = peer.embeddings.with_raw_response.create(model="text-embedding-3-small", input=texts)   # the client asks base64
        e1 = raw.parse()
        assert raw.headers["x-fanin-cache"] == "miss" and e1.model == embedder.name and e1.usage.prompt_tokens == embedder.count_tokens(texts)
        v = np.array([d.embedding for d in e1.data], dtype=np.float32)
        assert v.shape == (3, 384) and [d.index for d in e1.data] == [0, 1, 2] and np.array_equal(v[0], v[2])
        assert np.allclose(v, embedder.encode(texts), atol=1e-6)
        raw = peer.embeddings.with_raw_response.create(model="x", input=texts, encoding_format="float")
        assert raw.headers["x-fanin-cache"] == "hit"
        assert np.array_equal(v, np.array([d.embedding for d in raw.parse().data], dtype=np.float32))
        one = peer.embeddings.create(model="x", input="Paris is the capital of France.")
        assert np.array_equal(np.array(one.data[0].embedding, dtype=np.float32), v[1])
        u = gw.usage("index", "peerA")
        assert (u["embedding_requests"], u["embedding_texts"], u["embedding_misses"], u["embedding_hits"]) == (3, 7, 2, 3)
        assert gw.embedding_cache.count(embedder.name) == 2 and len(s.requests) == 0   # no chat: the model server never called
        with pytest.raises(openai.BadRequestError, match="dimensions"):
            peer.embeddings.create(model="x", input="a", dimensions=1536)
        with pytest.raises(openai.BadRequestError, match="token-id"):
            peer.embeddings.create(model="x", input=[[1, 2, 3]])


def test_requests_without_the_token_are_refused(tmp_path):
    with served(tmp_path) as (s, llm, gw):
        for method, path, body in [("GET", "/v1/models", None), ("POST", "/v1/chat/completions", {"messages": Q}),
                                   ("POST", "/v1/embeddings", {"input": "x"}), ("POST", "/stage/index/v1/chat/completions", {"messages": Q})]:
            r = httpx.request(method, gw.root + path, json=body)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", path
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=gw.base_url, api_key="sk-not-the-token").chat.completions.create(model="x", messages=Q)
        assert len(s.requests) == 0 and gw.usage()["unauthorized"] == 5
        assert httpx.get(f"{gw.base_url}/models", headers={"api-key": gw.token}).status_code == 200   # Azure-style header
        other = Gateway(llm, None, None)
        assert other.token != gw.token and len(gw.token) > 30


def test_the_real_key_is_never_returned(tmp_path, monkeypatch, embedder):
    key = "sk-real-secret-0123456789abcdefXYZ"
    monkeypatch.setenv("FANIN_TEST_REAL_KEY", key)
    with served(tmp_path, embedder, llm_kw={"api_key_env": "FANIN_TEST_REAL_KEY", "api_key_required": True}) as (s, llm, gw):
        assert gw.token != key and key not in json.dumps(gw.env("index")) and key not in repr(gw)
        h = _auth(gw)
        bodies = [httpx.get(f"{gw.base_url}/models", headers=h),
                  httpx.post(f"{gw.base_url}/chat/completions", headers=h, json={"messages": Q}),
                  httpx.post(f"{gw.base_url}/chat/completions", headers=h, json={"messages": Q, "stream": True}),
                  httpx.post(f"{gw.base_url}/embeddings", headers=h, json={"input": ["a"]}),
                  httpx.post(f"{gw.base_url}/chat/completions", headers=h, json={"messages": Q, "n": 3}),
                  httpx.post(f"{gw.base_url}/chat/completions", json={"messages": Q})]
        assert [r.status_code for r in bodies] == [200, 200, 200, 200, 400, 401]
        # an upstream error that quotes the key (OpenAI's 401 does, in part) is redacted before it leaves the gateway
        def leaky(*a, **k): raise LLMError(f"HTTP 401: Incorrect API key provided: {key}")
        monkeypatch.setattr(llm, "chat", leaky)
        bodies.append(httpx.post(f"{gw.base_url}/chat/completions", headers=h, json={"messages": [{"role": "user", "content": "new"}]}))
        assert bodies[-1].status_code == 502 and "[redacted]" in bodies[-1].json()["error"]["message"]
        for r in bodies:
            assert key not in r.text and key[:12] not in r.text and key not in json.dumps(dict(r.headers))
        assert key not in json.dumps(gw.stats())


def test_upstream_failures_are_5xx_errors_with_the_reason(tmp_path):
    with served(tmp_path, standin={"fault": "null_content"}) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.url_for("query", system="peerB"), api_key=gw.token)   # default max_retries=2
        with pytest.raises(openai.InternalServerError) as e:
            peer.chat.completions.create(model="x", messages=Q)
        assert e.value.status_code == 502 and "content is null" in e.value.body["message"]
        assert len(s.chats()) == 2, "the peer's client retried although the lab had (x-should-retry: false)"
        assert len(llm.cache) == 0 and gw.usage("query", "peerB")["failures"] == 1 and gw.usage("query", "peerB")["chat_errors"] == 1
        with pytest.raises(openai.InternalServerError):   # streaming asked: the same error, not an empty stream
            peer.chat.completions.create(model="x", messages=Q, stream=True)
    port = free_port()   # nothing listens there
    llm = _llm(f"http://127.0.0.1:{port}/v1", "m", tmp_path)
    t0 = time.perf_counter()
    with Gateway(llm, None, None) as gw:
        r = httpx.post(f"{gw.base_url}/chat/completions", headers=_auth(gw), json={"messages": Q})
        assert r.status_code == 503 and f"127.0.0.1:{port}" in r.json()["error"]["message"] and "does not answer" in r.json()["error"]["message"]
        assert r.json()["error"]["type"] == "upstream_unavailable"
        r = httpx.post(f"{gw.base_url}/embeddings", headers=_auth(gw), json={"input": "x"})
        assert r.status_code == 404 and "no embedder" in r.json()["error"]["message"]
    assert time.perf_counter() - t0 < 10


def test_ledger_counts_per_stage(tmp_path):
    with served(tmp_path) as (s, llm, gw):
        index = openai.OpenAI(base_url=gw.url_for("index", system="lightrag"), api_key=gw.token)
        query = openai.OpenAI(base_url=gw.url_for("query", system="lightrag"), api_key=gw.token)
        plain = openai.OpenAI(base_url=gw.url_for("query"), api_key=gw.token)
        tagged = openai.OpenAI(base_url=gw.base_url, api_key=gw.token, default_headers={"X-Fanin-Stage": "hdr", "X-Fanin-System": "mem0"})
        for i in range(3): index.chat.completions.create(model="x", messages=[{"role": "user", "content": f"chunk {i}"}])
        query.chat.completions.create(model="x", messages=[{"role": "user", "content": "chunk 0"}])   # same text: a hit
        plain.chat.completions.create(model="x", messages=Q)
        tagged.chat.completions.create(model="x", messages=Q)
        openai.OpenAI(base_url=gw.base_url, api_key=gw.token).chat.completions.create(model="x", messages=Q)
        rows = {(r["stage"], r["system"]): r for r in gw.stats()["chat"]["by_stage_system"]}
        assert {k: (r["requests"], r["calls"], r["cache_hits"]) for k, r in rows.items()} == {
            ("index", "lightrag"): (3, 3, 0), ("query", "lightrag"): (1, 0, 1), ("query", ""): (1, 1, 0),
            ("hdr", "mem0"): (1, 0, 1), ("gateway", ""): (1, 0, 1)}
        assert rows[("index", "lightrag")]["prompt_tokens"] == 33 and gw.usage(system="lightrag")["requests"] == 4
        assert gw.write(tmp_path / "gw.json").exists()
        with pytest.raises(ValueError):
            gw.url_for("bad/stage")


class _FakeServer:
    "Stands in for EmbeddedServer: start() 'runs' it at the stand-in's URL."
    def __init__(self, base_url): self.base_url, self.proc, self.n_ctx, self.starts = base_url, None, 2048, 0
    def start(self):
        self.proc, self.starts = type("P", (), {"poll": lambda self: None})(), self.starts + 1
        return self
    def stop(self): self.proc = None
    model_name = "standin-1"


def test_gateway_starts_and_stops_an_embedded_llm_and_stops_promptly(tmp_path):
    with StandIn() as s:
        fake = _FakeServer(s.base_url)
        llm = LLM(provider="embedded", server=fake, cache_path=tmp_path / "llm.sqlite")
        t0 = time.perf_counter()
        with Gateway(llm, None, None) as gw:
            assert fake.proc is not None and llm.base_url == s.base_url and gw.chat_model == "standin-1"
            peer = openai.OpenAI(base_url=gw.base_url, api_key=gw.token)
            assert peer.chat.completions.create(model="x", messages=Q).choices[0].message.content == "Paris."
            port = gw.port
        assert fake.proc is None, "the gateway started the LLM's server and must stop it"
        assert time.perf_counter() - t0 < 5
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1)
        with llm:   # an LLM the caller started stays running after the gateway
            with Gateway(llm, None, None): pass
            assert fake.proc is not None and fake.starts == 2
        assert fake.proc is None


def test_gateway_from_config(tmp_path):
    with StandIn() as s:
        cfg = compose(["llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}", f"paths.outputs={tmp_path / 'out'}",
                       f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1"])
        with gateway_from_config(cfg, max_tokens=64) as gw:
            assert gw.llm.cache.path == tmp_path / "out" / "llm_cache" / "llm.sqlite"
            assert gw.embedding_cache.path == tmp_path / "out" / "cache" / "embeddings.sqlite" and gw.max_tokens == 64
            peer = openai.OpenAI(base_url=gw.url_for("index", "peer"), api_key=gw.token)
            assert peer.chat.completions.create(model="x", messages=Q).choices[0].message.content == "Paris."
            assert len(peer.embeddings.create(model="x", input="hello").data[0].embedding) == 384


def test_concurrent_peer_calls_wait_for_the_llms_slots_and_hits_never_wait(tmp_path):
    import threading
    from concurrent.futures import ThreadPoolExecutor
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def slow(body):
        with lock: state["now"] += 1; state["most"] = max(state["most"], state["now"])
        time.sleep(0.05)
        with lock: state["now"] -= 1
        return "ok " + body["messages"][-1]["content"]

    with served(tmp_path, standin={"reply": slow}, llm_kw={"concurrency": 2}) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.url_for("index"), api_key=gw.token)
        ask = lambda i: peer.chat.completions.create(model="x", messages=[{"role": "user", "content": f"q{i}"}]).choices[0].message.content
        with ThreadPoolExecutor(8) as ex:
            assert list(ex.map(ask, range(8))) == [f"ok q{i}" for i in range(8)]
        assert state["most"] <= 2 and len(s.chats()) == 9   # 8 calls and the preflight probe
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as ex:
            assert list(ex.map(ask, range(8))) == [f"ok q{i}" for i in range(8)]
        assert len(s.chats()) == 9 and gw.usage("index")["cache_hits"] == 8 and time.perf_counter() - t0 < 2


def test_an_empty_reply_reaches_the_peer_and_replays_without_a_model_call(tmp_path):
    """The model saying nothing (content "", finish_reason stop) is its real output: the peer gets it as a 200 (a 5xx would stop
    a peer that does not retry, and greedy decoding gives the same empty reply on every retry); the lab's own callers still see
    a failure, and the reply is replayed to peers from the one cache, so a rebuild calls no model."""
    from fanin.models.llm import EmptyReply
    with served(tmp_path, standin={"reply": lambda body: ""}) as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.url_for("index", system="peerE"), api_key=gw.token, max_retries=0)
        r = peer.chat.completions.create(model="x", messages=Q, temperature=0)
        assert r.choices[0].message.content == "" and r.choices[0].finish_reason == "stop"
        n = len(s.chats())
        r2 = peer.chat.completions.create(model="x", messages=Q, temperature=0)
        assert r2.choices[0].message.content == "" and len(s.chats()) == n, "the replay asked the model again"
        assert gw.usage("index", "peerE")["empty_replies"] == 2 and len(llm.cache) == 0
        with pytest.raises(EmptyReply):   # the lab's own caller: a failure, never served from the empty-reply record
            llm.chat(Q, temperature=0)
    with served(tmp_path / "f", standin={"reply": lambda body: ""}, empty_replies="fail") as (s, llm, gw):
        peer = openai.OpenAI(base_url=gw.url_for("index", system="peerF"), api_key=gw.token, max_retries=0)
        with pytest.raises(openai.InternalServerError):
            peer.chat.completions.create(model="x", messages=Q, temperature=0)
