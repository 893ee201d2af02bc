"""The fault run's hostile and broken endpoints (a loopback stand-in, tests/openai_standin.py), each through the real `fanin`
command: a reply dripped a byte every 3 s, a rate limit with Retry-After at the preflight, a redirect to another host, a
10 MB reply to a 512-token limit, an endpoint that quotes the request's key back (in an error, under OPENAI_API_KEY and under
a custom `api_key_env`; in a reply text), and HTTPS with a certificate the client cannot verify."""
from __future__ import annotations

import json

from fault_run import CANARY, Fault, answer_args, with_standin

CTX = "reader_llm.context_tokens=4096"


def _answers(w) -> list[dict]:
    return [json.loads(l) for p in w.out.glob("faults/*/answers-*/answers.jsonl") for l in p.read_text().splitlines() if l.strip()]


def _ledgers(w) -> list[dict]:
    return [json.loads((f / "ledger.json").read_text()) for f in w.folders() if (f / "ledger.json").exists()]


def answered(w, r) -> bool:
    "Every answer written and ok."
    a = _answers(w)
    return bool(a) and all(x.get("status") == "ok" for x in a)


def cut_and_counted(w, r) -> bool:
    "The answers are written, none holds the 10 MB reply (each kept to the bound), and the ledger counts the cut replies."
    files = list(w.out.glob("faults/*/answers-*/answers.jsonl"))
    return (bool(files) and all(p.stat().st_size < 1_000_000 for p in files) and answered(w, r)
            and any(led.get("oversized", 0) > 0 for led in _ledgers(w)))


def key_redacted_in_answers(w, r) -> bool:
    "The answers are written and the key the endpoint quoted back is in them only as [redacted] (the leak check looks for it)."
    a = _answers(w)
    return answered(w, r) and all("[redacted]" in (x.get("text") or "") for x in a)


def redirect_runner(w, f):
    "A stand-in that redirects every request to a second stand-in on another host name (localhost) serving the same model."
    from openai_standin import StandIn
    with StandIn(model="served-7b") as other, StandIn(model="served-7b", redirect_to=f"http://localhost:{other.port}") as s:
        return w.run(answer_args(w, s, CTX), env=f.env)


def certificate_runner(w, f):
    "A stand-in on HTTPS with a self-signed certificate that no trust store holds."
    from openai_standin import StandIn, self_signed
    with StandIn(model="served-7b", tls=self_signed(w.base / "tls")) as s:
        return w.run(answer_args(w, s, CTX), env=f.env)


def extra_faults() -> list:
    F = []
    e = lambda *a, **k: F.append(Fault("endpoint", *a, **k))
    e("endpoint that drips its reply, a byte every 3 s", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, CTX, "reader_llm.timeout_s=8", "reader_llm.max_retries=0"), model="served-7b",
        drip_s=3, drip_after=1), expect=("timed out after 8 s", "timeout_s"))
    e("429 with Retry-After: 2 at the preflight", "survive", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, CTX), model="served-7b", statuses=[(429, {"Retry-After": "2"})]), check=answered)
    e("Retry-After longer than retry_after_cap_s", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, CTX), model="served-7b", statuses=[(429, {"Retry-After": "3600"})]),
      expect=("retry-after", "retry_after_cap_s"))
    e("redirect to another host", "stop", args=lambda w: [], runner=redirect_runner, expect=("redirects", "127.0.0.1", "localhost"))
    e("a 10 MB reply to max_tokens=512", "survive", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, CTX, "reader_llm.max_tokens=512"), model="served-7b",
        reply=lambda body: "Tower 1 was completed in 1911. " + "padding " * 1_300_000), check=cut_and_counted)
    e("certificate the client cannot verify (self-signed)", "stop", args=lambda w: [], runner=certificate_runner,
      env={"SSL_CERT_FILE": "", "SSL_CERT_DIR": ""}, expect=("certificate", "ssl_cert_file"))
    s = lambda *a, **k: F.append(Fault("secrets", *a, **k))
    s("key quoted back in an endpoint's error (OPENAI_API_KEY)", "stop", args=lambda w: [], runner=with_standin(
        lambda w, st: answer_args(w, st, CTX, "reader_llm.max_retries=0", provider="openai"), echo_key="error", echo_after=1),
      env={"OPENAI_API_KEY": CANARY}, expect=("failed",))
    s("key quoted back in an endpoint's error at the preflight (custom api_key_env)", "stop", args=lambda w: [], runner=with_standin(
        lambda w, st: answer_args(w, st, CTX, "reader_llm.api_key_env=FANIN_GATEWAY_TOKEN"), echo_key="error"),
      env={"FANIN_GATEWAY_TOKEN": CANARY}, expect=("rejects", "http 400", "[redacted]"))
    s("key quoted back in the reply text (custom api_key_env)", "survive", args=lambda w: [], runner=with_standin(
        lambda w, st: answer_args(w, st, CTX, "reader_llm.api_key_env=FANIN_GATEWAY_TOKEN"), echo_key="reply"),
      env={"FANIN_GATEWAY_TOKEN": CANARY}, check=key_redacted_in_answers)
    return F
