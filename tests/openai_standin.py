"""A small OpenAI-compatible stand-in server on loopback, for behaviour no local llama.cpp server has: a reasoning model's
parameter rules (HTTP 400 on `temperature` and `max_tokens`, naming `max_completion_tokens`), a server that answers
`json_schema` with HTTP 500 (as llama-cpp-python does), and malformed 200 replies (no choices, null content, an HTML body,
an answer cut at the token budget), and the faults of a hostile or broken endpoint: a reply dripped one byte at a time, HTTP
429 with Retry-After, a redirect to another host, an error or reply that quotes the request's API key, and HTTPS with a
certificate the client cannot verify (`self_signed`). `/v1/embeddings` answers with `embed(text)` per input (hashed words,
384 dims, by default). Every request it receives is kept in `requests` (the Authorization header of each in `auths`)."""
from __future__ import annotations

import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


def hashed_embedding(text: str, dim: int = 384) -> list[float]:
    "A deterministic bag-of-words vector (each lower-cased word hashed to a coordinate), unit length: shared words mean similar vectors."
    import hashlib, math, re
    v = [0.0] * dim
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def _default_reply(body: dict) -> str:
    rf = body.get("response_format") or {}
    if rf or "json" in json.dumps(body.get("messages", [])).lower():
        return json.dumps({"ok": True, "correct": True, "reason": "stand-in"})
    return "Paris."


class StandIn:
    """`with StandIn(reasoning=True) as s: LLM(provider="vllm", base_url=s.base_url, model=s.model, ...)`.
    reasoning: reject temperature (other than 1) and max_tokens with HTTP 400, as OpenAI's reasoning models do.
    no_json_schema: answer response_format json_schema with HTTP 500, as llama-cpp-python does.
    fault: one of None, "no_choices", "null_content", "html", "bad_json", "cut" — how every chat reply is malformed.
    reply: body -> reply text.
    drip_s: chat replies after the first `drip_after` are sent one byte every `drip_s` seconds (headers at once).
    statuses: the next chat requests are answered with these (status, headers), one each: [(429, {"Retry-After": "2"})].
    redirect_to: every request is answered 307 to this base (scheme://host:port) + the request's path.
    echo_key: "error" (HTTP 400 whose message quotes the request's key) or "reply" (a reply text that quotes it), for the
    chat requests after the first `echo_after`; "error" also refuses every embeddings request so.
    tls: (certificate file, key file): serve HTTPS (`base_url` starts https://); see `self_signed`."""

    def __init__(self, model: str = "standin-1", reasoning: bool = False, no_json_schema: bool = False,
                 fault: str | None = None, reply: Callable[[dict], str] = _default_reply, list_models: bool = True,
                 embed: Callable[[str], list[float]] = hashed_embedding, embed_errors: list[int] | None = None,
                 max_model_len: int | None = None, drip_s: float | None = None, drip_after: int = 0,
                 statuses: list[tuple[int, dict]] | None = None, redirect_to: str | None = None,
                 echo_key: str | None = None, echo_after: int = 0, tls: tuple[str, str] | None = None):
        self.drip_s, self.drip_after, self.statuses, self.redirect_to = drip_s, drip_after, list(statuses or []), redirect_to
        self.echo_key, self.echo_after, self.tls = echo_key, echo_after, tls
        self.auths: list[str] = []
        self.max_model_len = max_model_len   # reported in /v1/models as vLLM does (None: not reported, as most servers)
        self.model, self.reasoning, self.no_json_schema, self.fault = model, reasoning, no_json_schema, fault
        self.reply, self.list_models, self.embed, self.embed_errors = reply, list_models, embed, list(embed_errors or [])
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a): pass

            def _send(self, status: int, payload, ctype="application/json", headers: dict | None = None, drip: float | None = None):
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items(): self.send_header(k, v)
                self.end_headers()
                try:
                    if not drip: return self.wfile.write(data)
                    for i in range(len(data)):   # a byte at a time: every read gets something, so no read timeout fires
                        self.wfile.write(data[i:i + 1]); self.wfile.flush(); time.sleep(drip)
                except OSError: pass   # the client gave up (a deadline, an interrupt) before the reply was sent

            def _redirected(self) -> bool:
                if not outer.redirect_to: return False
                self.send_response(307)
                self.send_header("Location", outer.redirect_to.rstrip("/") + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True

            def do_GET(self):
                if self._redirected(): return
                if self.path.rstrip("/").endswith("/models"):
                    if not outer.list_models: return self._send(404, {"error": {"message": "not found"}})
                    entry = {"id": outer.model, "object": "model"}
                    if outer.max_model_len: entry["max_model_len"] = outer.max_model_len
                    return self._send(200, {"object": "list", "data": [entry]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self._redirected(): return
                outer.requests.append(body)
                outer.auths.append(self.headers.get("Authorization", ""))
                if self.path.endswith("/embeddings"):  # any model name; `embed` makes the vectors (hashed words by default)
                    if outer.echo_key == "error":   # the refused key quoted back
                        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                        return self._send(400, {"error": {"message": f"Invalid request: key {key} is not allowed", "type": "invalid_request_error"}})
                    if outer.embed_errors:  # the next requests fail with these HTTP statuses, one each (a flaky server)
                        return self._send(outer.embed_errors.pop(0), {"error": {"message": "stand-in embeddings fault", "type": "server_error"}})
                    texts = body.get("input")
                    texts = [texts] if isinstance(texts, str) else list(texts or [])
                    return self._send(200, {"object": "list", "model": body.get("model", ""), "usage": {"prompt_tokens": 0, "total_tokens": 0},
                                            "data": [{"object": "embedding", "index": i, "embedding": outer.embed(t)} for i, t in enumerate(texts)]})
                if not self.path.endswith("/chat/completions"): return self._send(404, {"error": {"message": "no route"}})
                n = len(outer.chats())   # this request's number, from 1
                if outer.statuses:
                    status, headers = outer.statuses.pop(0)
                    return self._send(status, {"error": {"message": f"stand-in HTTP {status}", "type": "rate_limit_error"}}, headers=headers)
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if outer.echo_key == "error" and n > outer.echo_after:   # as some gateways do: the refused key quoted back
                    return self._send(400, {"error": {"message": f"Invalid request: key {key} is not allowed for this model",
                                                      "type": "invalid_request_error"}})
                if body.get("model") != outer.model:
                    return self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist", "type": "invalid_request_error"}})
                if outer.reasoning:
                    if "max_tokens" in body:
                        return self._send(400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                                                     "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                                                          "param": "max_tokens", "code": "unsupported_parameter"}})
                    if "temperature" in body and body["temperature"] != 1:
                        return self._send(400, {"error": {"message": f"Unsupported value: 'temperature' does not support {body['temperature']} "
                                                                     "with this model. Only the default (1) value is supported.",
                                                          "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}})
                if outer.no_json_schema and (body.get("response_format") or {}).get("type") == "json_schema":
                    return self._send(500, {"error": {"message": "Internal Server Error", "type": "internal_server_error"}})
                if outer.fault == "html":
                    return self._send(200, "<html><body><h1>Bad gateway</h1></body></html>", "text/html")
                if outer.fault == "bad_json":   # says JSON, is not: a proxy that cut the body
                    return self._send(200, '{"id": "chatcmpl-cut", "choices": [{"index": 0, "mess', "application/json")
                text, finish = outer.reply(body), "stop"
                if outer.echo_key == "reply" and n > outer.echo_after: text = f"{text} (you called with {key})"
                if outer.fault == "cut": text, finish = text[: max(1, len(text) // 2)], "length"
                msg = {"role": "assistant", "content": None if outer.fault == "null_content" else text}
                choices = [] if outer.fault == "no_choices" else [{"index": 0, "message": msg, "finish_reason": finish}]
                self._send(200, {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": outer.model,
                                 "choices": choices, "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}},
                           drip=outer.drip_s if outer.drip_s and n > outer.drip_after else None)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str: return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/v1"

    @property
    def port(self) -> int: return self.httpd.server_address[1]

    def chats(self) -> list[dict]: return [r for r in self.requests if "messages" in r]
    def embeddings(self) -> list[dict]: return [r for r in self.requests if "input" in r]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def self_signed(folder) -> tuple[str, str]:
    "A self-signed certificate for 127.0.0.1 (and its key) written into `folder`: (certificate file, key file)."
    import datetime, ipaddress
    from pathlib import Path
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "fanin stand-in")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = Path(folder); folder.mkdir(parents=True, exist_ok=True)
    c, k = folder / "standin-cert.pem", folder / "standin-key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(c), str(k)
