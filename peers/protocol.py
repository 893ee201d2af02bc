"""The JSONL protocol every peer adapter speaks with the lab (`fanin.systems.peers.PeerProcess`): one copy, imported by each adapter.

It runs in each peer's own environment, so it uses the standard library only. Its sha256 is part of every peer's fingerprint
(`PeerSystem.model_files`), like the adapter's.

- `take_stdout()` must run before the peer package is imported. It keeps a copy of the real stdout as the protocol channel,
  and points fd 1 and `sys.stdout` at stderr. Whatever the package prints or logs then lands in the lab's log, never in the
  protocol.
- `serve(package, version, modes, ops, use_base_url, ...)` answers commands, one JSON object a line on stdin, until `quit` or
  the end of stdin:
  - it sends the hello first (`{"ok": true, "op": "hello", "package": ..., "version": ..., "modes": [...], ...}`);
  - then one reply a command: `{"ok": true, "op": ..., **ops[op](cmd)}`, or, when the command failed,
    `{"ok": false, "op": ..., "error": "Type: message", "traceback": ...}`.
  A failed command never ends the adapter: the lab records the failure and decides."""
from __future__ import annotations

import json
import os
import sys
import traceback

_CHANNEL = None


def take_stdout():
    "Keep the real stdout for the protocol and send every other write to stderr (idempotent)."
    global _CHANNEL
    if _CHANNEL is None:
        _CHANNEL = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    return _CHANNEL


def send(obj: dict) -> None:
    "One reply line on the protocol channel."
    _CHANNEL.write(json.dumps(obj, ensure_ascii=False) + "\n")
    _CHANNEL.flush()


def serve(package: str, version: str, modes, ops: dict, use_base_url, close=None, **hello) -> None:
    """Answer the lab's commands.

    - The hello names `package`, its `version`, its `modes`, the adapter's python and any `hello` fields.
    - `modes`: the values the `mode` of `index` and `query` may take. Each adapter passes its module-level `MODES` literal; the
      lab reads that literal from the adapter's source before it starts it (`fanin.systems.peers.adapter_modes`, to check a system
      config's `mode`) and checks the hello against it, so the adapter is the one place a peer's modes are written.
    - `ops` maps an op name (index, load, query) to a function of the command that returns the reply's fields.
    - `use_base_url(url)` runs before each command with the command's gateway URL (None when it names none): adapters repoint
      their clients there, since the lab counts calls per stage by URL.
    - `close()` runs before the reply to `quit`, so everything is on disk when the lab reads it. It runs again when stdin
      ends or the adapter fails, so it must be idempotent."""
    take_stdout()
    send({"ok": True, "op": "hello", "package": package, "version": version, "modes": list(modes), "python": sys.version.split()[0],
          **hello})
    try:
        for line in sys.stdin:
            if not line.strip(): continue
            cmd = {}
            try:
                cmd = json.loads(line)
                op = cmd.get("op")
                use_base_url(cmd.get("base_url"))
                if op == "quit":
                    if close: close()
                    send({"ok": True, "op": "quit"})
                    return
                if op not in ops: raise ValueError(f"unknown op {op!r}")
                send({"ok": True, "op": op, **ops[op](cmd)})
            except Exception as e:
                send({"ok": False, "op": cmd.get("op") if isinstance(cmd, dict) else None,
                      "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]})
    finally:
        if close: close()
