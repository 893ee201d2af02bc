"""Ctrl-C stops a run within seconds whatever the model is doing: with the endpoint hanging on calls in flight, `fanin run`
exits 130 with one line (what was kept, how to resume) and no traceback, and the rerun resumes: the answers that finished
are replayed from the cache, not asked again."""
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from openai_standin import StandIn

ROOT = Path(__file__).resolve().parents[1]


def test_ctrl_c_stops_within_seconds_while_calls_hang(tiny_overrides):
    calls, hang = [], threading.Event()

    def reply(body):
        calls.append(1)
        if len(calls) > 2 and "json" not in str(body.get("response_format") or "").lower():
            hang.wait(120)                      # the endpoint stops answering after two replies
        return "Tower 1 was completed in 1911."

    with StandIn(model="served-7b", max_model_len=4096, reply=reply) as s:
        ov = tiny_overrides + ["system=bm25", "answer.per_domain_type=null", "answer.check_judges=false", "answer.judges=[keyfact]",
                               "reader_llm=vllm", f"reader_llm.base_url={s.base_url}", f"reader_llm.model={s.model}",
                               "reader_llm.concurrency=2", "reader_llm.timeout_s=300"]
        cmd = [sys.executable, "-m", "fanin.doors.cli", "run", "--stages", "index,retrieve,evaluate,answer", *ov]
        # as a terminal starts it: SIGINT at its default (a shell running this suite in the background may have set it to ignored,
        # and a child inherits that)
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        t0 = time.time()
        while len(calls) < 3 and time.time() - t0 < 120: time.sleep(0.2)
        assert len(calls) >= 3, "the run never reached the hanging call"
        time.sleep(1.0)
        t = time.time()
        p.send_signal(signal.SIGINT)
        try: out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill(); raise AssertionError("the run was still alive 10 s after Ctrl-C")
        took = time.time() - t
        hang.set()
    assert took < 5, f"Ctrl-C took {took:.1f} s"
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert "Traceback" not in err and "interrupted" in err and "run the same command again" in err
    # the rerun goes on from there and finishes
    with StandIn(model="served-7b", max_model_len=4096, reply=lambda b: "Tower 1 was completed in 1911.") as s2:
        ov2 = [o.replace(s.base_url, s2.base_url) for o in ov]
        r = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "run", "--stages", "index,retrieve,evaluate,answer", *ov2],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
