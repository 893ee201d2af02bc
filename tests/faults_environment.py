"""Fault kinds of the machine and the command line: SIGTERM, a read-only or full outputs disk, `ulimit -f`, names too long,
an ASCII locale, names that would leave the outputs folder, a Python tag in a config file, Unicode look-alikes, a notebook
edited without export, a sweep on a missing domain. Run by `tests/fault_run.py` beside its own kinds."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

from fault_run import PY, ROOT, Fault, metrics_ok, run_bm25


def term_runner(args_fn, after, rerun: bool = True):
    """Start the command, wait until `after(w)` holds, send SIGTERM and require exit 143 within 5 s with one line saying it
    stopped; then (with `rerun`) run the same command again, which must resume and finish: its result is what is classified."""
    def runner(w, f):
        p = subprocess.Popen([PY, "-m", "fanin.doors.cli", *args_fn(w)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.time()
        while not after(w) and time.time() - t0 < 120 and p.poll() is None: time.sleep(0.05)
        t = time.time()
        p.send_signal(signal.SIGTERM)
        try: out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired: p.kill(); out, err = p.communicate()
        took = time.time() - t
        if p.returncode != 143 or took > 5 or "stopped by SIGTERM" not in err:
            return subprocess.CompletedProcess(p.args, 1 if p.returncode in (0, 143) else p.returncode, out,
                                               err + f"\n[fault run: SIGTERM gave exit {p.returncode} after {took:.1f} s]")
        if not rerun: return subprocess.CompletedProcess(p.args, p.returncode, out, err)
        r = w.run(args_fn(w))
        return subprocess.CompletedProcess(r.args, r.returncode, r.stdout, err + r.stderr)
    return runner


def held_for(cond, seconds: float):
    "A condition that holds `seconds` after `cond` first held (e.g. a model server started, then some generation under way)."
    first = {}
    def after(w):
        if "t" not in first and cond(w): first["t"] = time.time()
        return "t" in first and time.time() - first["t"] >= seconds
    return after


def answers_ok(w) -> bool:
    "Every sampled question has an answer that is not a failure."
    fs = list(w.out.glob("faults/*/answers-*/answers.jsonl"))
    rows = [json.loads(l) for f in fs for l in f.read_text().splitlines() if l.strip()]
    return bool(rows) and all(r.get("status") != "failed" and r.get("text") for r in rows)


def mounted_runner(size: str, read_only: bool = False, after_prepare=None):
    "Run the command with paths.outputs on a small tmpfs (root only), read-only when asked; unmounted afterwards."
    def runner(w, f):
        mnt = w.base / "disk"
        mnt.mkdir()
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True)
        if m.returncode: raise RuntimeError(f"cannot mount a tmpfs here ({m.stderr.strip()}); this fault needs root")
        try:
            args = run_bm25(w, f"paths.outputs={mnt}")
            if after_prepare is not None: w.run(args)
            if read_only: subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
            r = w.run(args)
            w.disk_result = (mnt / "faults").exists() and metrics_ok_at(mnt)
            return r
        finally:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    return runner


def metrics_ok_at(out: Path) -> bool:
    fs = sorted(p.parent for p in out.glob("faults/*/manifest.json"))
    return bool(fs) and all((f / "metrics.csv").exists() and len((f / "metrics.csv").read_text().splitlines()) == 5 for f in fs)


def ulimit_runner(limit_bytes: int):
    def runner(w, f):
        import resource
        def limit(): resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
        return subprocess.run([PY, "-m", "fanin.doors.cli", *run_bm25(w)], cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    return runner


def home_copy(w, edit=None) -> Path:
    "A copy of the checkout's configs (and notebooks and package, for the drift kind) as $FANIN_HOME, changed by `edit`."
    home = w.base / "home"
    shutil.copytree(ROOT / "configs", home / "configs")
    if edit: edit(home)
    return home


def with_home(args_fn, edit):
    def runner(w, f):
        home = home_copy(w, edit)
        return w.run(args_fn(w), env={"FANIN_HOME": str(home)})
    return runner


def _python_tag(home: Path):
    (home / "configs" / "experiment" / "mine.yaml").write_text("# @package _global_\nk: !!python/object/apply:os.system ['echo pwned']\n")


def _drifted(home: Path):
    shutil.copytree(ROOT / "nbs", home / "nbs")
    shutil.copytree(ROOT / "src", home / "src")
    (home / ".git").mkdir()
    p = home / "nbs" / "09_cli.ipynb"
    nb = json.loads(p.read_text())
    cell = next(c for c in nb["cells"] if c.get("id") == "cc0b9645")
    cell["source"] = "".join(cell["source"]).replace("The numbers a run ends on", "The numbers a run ends with")
    p.write_text(json.dumps(nb))


def _rerun_answers(w, f):
    "The answer run the fault's `prepare` made, run again against a fresh stand-in (its replies come from the LLM cache)."
    from fault_run import answer_args
    from openai_standin import StandIn
    with StandIn() as st: return w.run(answer_args(w, st, "reader_llm.context_tokens=4096"))


def extra_faults() -> list:
    F = []
    i = lambda *a, **k: F.append(Fault("interruption", *a, **k))
    i("SIGTERM during the dense embedding, then the rerun", "survive", args=lambda w: [], runner=term_runner(
        lambda w: ["run", *w.ov("system=dense", "embedder.threads=1")], after=lambda w: (w.out / "cache").exists()), check=metrics_ok)
    i("SIGTERM during retrieval, then the rerun", "survive", args=lambda w: [], runner=term_runner(
        lambda w: run_bm25(w), after=lambda w: bool(list(w.out.glob("index/**/index.json")))), check=metrics_ok)
    i("SIGTERM while the embedded reader generates, then the rerun", "survive", args=lambda w: [], runner=term_runner(
        lambda w: ["run", "--stages", "index,retrieve,evaluate,answer,judge", *w.ov("system=bm25", "answer.per_domain_type=1",
                   "answer.check_judges=false", "answer.judges=[keyfact]")], after=held_for(lambda w: (w.out / "llm_cache").exists(), 6)),
      check=lambda w, r: metrics_ok(w, r) and answers_ok(w))
    i("SIGTERM says what it kept (exit 143)", "stop", args=lambda w: [], runner=term_runner(
        lambda w: run_bm25(w), after=lambda w: bool(list(w.out.glob("index/**/index.json"))), rerun=False),
      expect=("stopped by sigterm", "run the same command again"))

    v = lambda *a, **k: F.append(Fault("environment", *a, **k))
    v("outputs on a read-only disk (fresh)", "stop", args=lambda w: [], runner=mounted_runner("8m", read_only=True), expect=("read-only", "paths.outputs"))
    v("outputs on a read-only disk after a finished run", "stop", args=lambda w: [], runner=mounted_runner("16m", read_only=True, after_prepare=True),
      expect=("read-only", "paths.outputs"))
    v("outputs on a disk that fills", "stop", args=lambda w: [], runner=mounted_runner("40k"), expect=("no space", "paths.outputs"))
    v("a file-size limit (ulimit -f)", "stop", args=lambda w: [], runner=ulimit_runner(2_000), expect=("ulimit",))
    v("a 300-character folder name", "stop", args=lambda w: run_bm25(w, f"paths.outputs={w.base / ('x' * 300)}"), expect=("too long",))
    v("a path past PATH_MAX", "stop", args=lambda w: run_bm25(w, "paths.outputs=" + str(w.base / "/".join(["y" * 200] * 25))), expect=("too long",))
    v("an ASCII locale and a Unicode data path", "survive",
      setup=lambda w: shutil.move(str(w.data), str(w.base / "données-ü")),
      args=lambda w: ["run", *w.ov("system=bm25", f'dataset.root="{w.base / "données-ü"}"')], env={"LC_ALL": "C", "LANG": "C"},
      check=lambda w, r: metrics_ok(w, r))
    v("fanin sweep on a missing domain", "stop", args=lambda w: ["sweep", *w.ov("experiment=topk", "sweep.domain=atlantis")], expect=("atlantis",))

    k = lambda *a, **kw: F.append(Fault("caches", *a, **kw))
    k("ledger.json cut after a finished run with answers", "survive", prepare="answers", args=lambda w: [], runner=_rerun_answers,
      setup=lambda w: [f.write_text(f.read_text()[: len(f.read_text()) // 2]) for f in w.out.glob("faults/*/ledger.json")],
      check=lambda w, r: all(json.loads(f.read_text()).get("requests") is not None for f in w.out.glob("faults/*/ledger.json"))
      and bool(list(w.out.glob("faults/*/ledger.json"))))

    c = lambda *a, **k: F.append(Fault("config", *a, **k))
    c("experiment_name=../../x", "stop", args=lambda w: run_bm25(w, "experiment_name=../../x"), expect=("experiment_name", "plain name"))
    c("an absolute experiment_name", "stop", args=lambda w: run_bm25(w, "experiment_name=/tmp/fanin-escape"), expect=("experiment_name", "plain name"))
    c("system.name=../../../x", "stop", args=lambda w: run_bm25(w, "system.name=../../../x"), expect=("system.name", "plain name"))
    c("a !!python tag in a user config", "stop", args=lambda w: [], runner=with_home(lambda w: run_bm25(w, "+experiment=mine"), _python_tag),
      expect=("mine.yaml:2", "python"))
    c("an unquoted Unicode override", "stop", args=lambda w: run_bm25(w, "experiment_name=résumé-ß"), expect=("outside ascii", "quote"))
    c("a homoglyph domain name (Cyrillic а)", "stop", args=lambda w: run_bm25(w, "dataset.domains=[n\u0430ture]"), expect=("did you mean", "nature"))
    c("a notebook edited but not exported", "survive", args=lambda w: [], runner=with_home(run_bm25, _drifted),
      check=lambda w, r: metrics_ok(w, r) and "nbs/ and src/fanin disagree" in r.stderr)
    return F
