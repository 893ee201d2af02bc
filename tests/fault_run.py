"""The lab's fault run: every kind of fault a demanding user meets (bad data, bad configuration, stale outputs, interruption,
concurrency, a misbehaving endpoint, damaged caches and outputs, secrets), injected one at a time into a fresh copy of the
WildGraphBench-shaped fixture, each run through the real `fanin` command in its own process.

Each fault declares what a user should see:
- `stop`:    the command refuses before (or without) doing harm: a non-zero exit, a message naming what is wrong (`expect`
             words), no traceback;
- `survive`: the command succeeds with a correct, fresh result (its `check` holds), healing what can be healed.
Each outcome is one of: survived, stopped (clear), unclear error (stopped, but the message lacks the words that name the fault),
raw traceback, silent wrong result (exit 0 where it had to stop, or a failed check), leak (a canary secret found in any file
written or anything printed), data lost (finished work missing after the fault).

`python tests/fault_run.py` (or `make faults`) prints one line per fault and the counts; `--json FILE` keeps them
(`data/measured/faults.json` is the run the README quotes). `tests/test_faults.py` runs a fast subset in the suite."""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
FIXTURE = ROOT / "tests" / "fixtures" / "wildgraphbench_tiny"
TOPIC = "corpus/nature/Tiny typhoon season"
QA = "QA/nature/questions.jsonl"
CANARY = "sk-CANARY-fault-run-4e1d"
PY = sys.executable


@dataclass
class Fault:
    category: str
    name: str
    kind: str                                   # stop | survive
    setup: Callable = lambda w: None            # damages the workspace before the command
    args: Callable = lambda w: []               # the fanin command's arguments (after `fanin`)
    expect: tuple = ()                          # words the message must hold (stop), lower-cased match
    check: Callable = lambda w, r: True         # survive: the result is right
    prepare: Callable | None = None             # a first, clean run the fault acts on (its outputs are the data that must not be lost)
    runner: Callable | None = None              # a custom way to run (interruption, concurrency, endpoints)
    env: dict = field(default_factory=dict)


class Work:
    "A fresh copy of the fixture data and an empty outputs folder."
    def __init__(self, base: Path):
        self.base = base
        self.data = base / "wgb"
        shutil.copytree(FIXTURE, self.data)
        self.out = base / "outputs"

    def ov(self, *extra) -> list[str]:
        "The workspace's overrides; an extra override of a key already there replaces it."
        base = [f"dataset.root={self.data}", "dataset.domains=[nature]", f"paths.outputs={self.out}", "progress=false",
                "experiment_name=faults", f"embedder.model_dir={ROOT / 'outputs' / 'models'}"]
        out = {}
        for o in [*base, *extra]: out[o.split("=", 1)[0]] = o   # the last value of a key wins
        return list(out.values())

    def run(self, args, timeout=300, env=None):
        e = {**os.environ, **(env or {})}
        return subprocess.run([PY, "-m", "fanin.doors.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=e)

    def folders(self):
        return sorted(p.parent for p in self.out.glob("faults/*/manifest.json"))


def run_bm25(w, *extra): return ["run", *w.ov("system=bm25", *extra)]
def run_dense(w, *extra): return ["run", *w.ov("system=dense", *extra)]


def edit(path: Path, fn):
    path.write_text(fn(path.read_text(encoding="utf-8")), encoding="utf-8")


def line(path: Path, n: int, fn):
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[n - 1] = fn(lines[n - 1])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def page(w, name="Bolaven damage in Korea.txt") -> Path: return w.data / TOPIC / "reference_pages" / name


def packs_ok(w, r) -> bool:
    fs = w.folders()
    return bool(fs) and all((f / "packs.jsonl.gz").exists() and gzip.decompress((f / "packs.jsonl.gz").read_bytes()).count(b"\n") == 4
                            for f in fs)


def metrics_ok(w, r) -> bool:
    return packs_ok(w, r) and all((f / "metrics.csv").exists() and len((f / "metrics.csv").read_text().splitlines()) == 5 for f in w.folders())


# ---------------------------------------------------------------- endpoint runners (a stand-in server on loopback)
def with_standin(args_fn, **standin):
    def runner(w, f):
        from openai_standin import StandIn
        with StandIn(**standin) as s:
            return w.run(args_fn(w, s), env=f.env)
    return runner


def answer_args(w, s, *extra, provider="vllm", url=None):
    return ["run", "--stages", "index,retrieve,evaluate,answer,judge",
            *w.ov("system=bm25", "answer.per_domain_type=1", "answer.check_judges=false", "answer.judges=[keyfact]",
                  f"reader_llm={provider}", f"reader_llm.base_url={url or s.base_url}", f"reader_llm.model={s.model}", *extra)]
# (w.ov replaces a repeated key, so an `extra` reader_llm.model=... wins over the stand-in's)


def interrupt_runner(args_fn, after: Callable, hang_after: int | None = None):
    "Start the command, wait until `after(w, calls)` holds, send SIGINT, and require exit 130 within 5 s."
    def runner(w, f):
        from openai_standin import StandIn
        calls, release = [], threading.Event()
        def reply(body):
            calls.append(1)
            if hang_after is not None and len(calls) > hang_after: release.wait(120)
            return "Tower 1 was completed in 1911."
        with StandIn(model="served-7b", max_model_len=4096, reply=reply) as s:
            p = subprocess.Popen([PY, "-m", "fanin.doors.cli", *args_fn(w, s)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # as from a terminal
            t0 = time.time()
            while not after(w, calls) and time.time() - t0 < 120 and p.poll() is None: time.sleep(0.1)
            t = time.time()
            p.send_signal(signal.SIGINT)
            try: out, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired: p.kill(); out, err = p.communicate()
            release.set()
            took = time.time() - t
        rc = p.returncode if took <= 5 else -999
        return subprocess.CompletedProcess(p.args, rc, out, err + (f"\n[fault run: exit took {took:.1f} s]" if took > 5 else ""))
    return runner


def concurrent_runner(w, f):
    ps = [subprocess.Popen([PY, "-m", "fanin.doors.cli", *run_bm25(w)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in ps]
    rc = max(p.returncode for p in ps)
    return subprocess.CompletedProcess([], rc, "".join(o for o, _ in outs), "".join(e for _, e in outs))


def faults() -> list[Fault]:
    F = []
    # ------------------------------------------------------------------ data
    d = lambda *a, **k: F.append(Fault("data", *a, **k))
    d("emptied gold page (0 bytes)", "stop", lambda w: page(w).write_text(""), run_bm25, ("bolaven damage in korea.txt", "page text"))
    d("page holding only its title line", "stop", lambda w: page(w).write_text("# Bolaven damage in Korea\n\n"), run_bm25, ("page text",))
    d("page that is not UTF-8", "stop", lambda w: page(w).write_bytes(b"# Bolaven\n\xff\xfe broken \xc3\x28 bytes"), run_bm25, ("bolaven", "utf-8"))
    d("question line of 2 MB", "stop", lambda w: line(w.data / QA, 2, lambda l: l.replace('"question": "', '"question": "' + "x" * 2_000_000, 1)),
      run_bm25, ("questions.jsonl", "line 2"))
    d("question line cut in the middle", "stop", lambda w: line(w.data / QA, 2, lambda l: l[: len(l) // 2]), run_bm25, ("line 2", "json"))
    d("question file cut at its end", "stop", lambda w: (w.data / QA).write_text((w.data / QA).read_text()[:-40]), run_bm25, ("questions.jsonl",))
    d("question with bytes that are not UTF-8", "stop", lambda w: (w.data / QA).write_bytes((w.data / QA).read_bytes().replace(b"Vicente", b"Vic\xffnte", 1)),
      run_bm25, ("questions.jsonl", "utf-8"))
    d("question without its question field", "stop", lambda w: line(w.data / QA, 1, lambda l: l.replace('"question":', '"qestion":', 1)),
      run_bm25, ("line 1", "question"))
    d("unknown question type", "stop", lambda w: line(w.data / QA, 1, lambda l: l.replace('"single-fact"', '"trivia"')), run_bm25, ("line 1", "question_type"))
    d("question with no ref_urls", "stop", lambda w: line(w.data / QA, 1, lambda l: l.replace('"ref_urls": ["https://example.org/vicente"]', '"ref_urls": []')),
      run_bm25, ("line 1", "ref_urls"))
    d("ref_url that is not a URL", "stop", lambda w: line(w.data / QA, 1, lambda l: l.replace("https://example.org/vicente", "example.org/vicente")),
      run_bm25, ("line 1", "ref_urls"))
    d("fact question without an answer", "stop", lambda w: line(w.data / QA, 1, lambda l: l.replace('"answer": "Hurricane Signal No. 10."', '"answer": ""')),
      run_bm25, ("line 1", "answer"))
    d("the same question twice", "stop", lambda w: (w.data / QA).write_text((w.data / QA).read_text() + (w.data / QA).read_text().splitlines()[0] + "\n"),
      run_bm25, ("questions.jsonl", "question"))
    d("questions file missing", "stop", lambda w: (w.data / QA).unlink(), run_bm25, ("questions.jsonl",))
    d("questions file empty", "stop", lambda w: (w.data / QA).write_text(""), run_bm25, ("questions.jsonl", "at least one question"))
    d("references.jsonl missing", "stop", lambda w: (w.data / TOPIC / "references.jsonl").unlink(), run_bm25, ("references.jsonl",))
    d("references.jsonl line damaged", "stop", lambda w: line(w.data / TOPIC / "references.jsonl", 1, lambda l: l[:10]), run_bm25, ("references.jsonl", "line 1"))
    d("topic folder missing", "stop", lambda w: shutil.rmtree(w.data / TOPIC), run_bm25, ("topic folder",))
    d("no reference pages", "stop", lambda w: shutil.rmtree(w.data / TOPIC / "reference_pages"), run_bm25, ("reference_pages",))
    d("unresolvable reference with unresolved_refs=fail", "stop", lambda w: None, lambda w: run_bm25(w, "dataset.unresolved_refs=fail"),
      ("ref_urls", "not-in-references"))
    d("a domain that does not exist", "stop", lambda w: None, lambda w: run_bm25(w, "dataset.domains=[atlantis]"), ("atlantis",))
    d("dataset.root pointing nowhere", "stop", lambda w: None, lambda w: run_bm25(w, "dataset.root=/nonexistent/wgb"), ("/nonexistent/wgb",))
    d("a page added after a run (stale data)", "survive", lambda w: page(w, "New page.txt").write_text("# New page\n\nTyphoon Vicente hit Hong Kong.\n"),
      run_bm25, check=metrics_ok, prepare=run_bm25)
    d("a page edited after a run (stale data)", "survive", lambda w: edit(page(w), lambda t: t + "\nA new paragraph about Bolaven.\n"),
      run_bm25, check=metrics_ok, prepare=run_bm25)
    d("a question edited after a run (stale data)", "survive", lambda w: line(w.data / QA, 1, lambda l: l.replace("Which signal", "What signal")),
      run_bm25, check=metrics_ok, prepare=run_bm25)
    d("stale data under integrity.on_change=refuse", "stop", lambda w: edit(page(w), lambda t: t + "\nMore.\n"),
      lambda w: run_bm25(w, "integrity.on_change=refuse"), ("made from other inputs",), prepare=run_bm25)
    # ------------------------------------------------------------------ configuration
    c = lambda *a, **k: F.append(Fault("config", *a, **k))
    c("k=0", "stop", args=lambda w: run_bm25(w, "k=0"), expect=("k=0",))
    c("k=1.5", "stop", args=lambda w: run_bm25(w, "k=1.5"), expect=("k=1.5",))
    c("k=abc", "stop", args=lambda w: run_bm25(w, "k=abc"), expect=("k=",))
    c("k_summary=-3", "stop", args=lambda w: run_bm25(w, "k_summary=-3"), expect=("k_summary",))
    c("misspelt added key +k_sumary=3", "stop", args=lambda w: run_bm25(w, "+k_sumary=3"), expect=("k_sumary", "k_summary"))
    c("unknown system", "stop", args=lambda w: ["run", *w.ov("system=bm26")], expect=("bm26", "bm25"))
    c("unknown embedder", "stop", args=lambda w: run_dense(w, "embedder=minilm_fast"), expect=("minilm_fast",))
    c("unknown stage", "stop", args=lambda w: ["run", "--stages", "index,retrive", *w.ov("system=bm25")], expect=("retrive",))
    c("paths.outputs is a file", "stop", lambda w: (w.base / "afile").write_text("x"), lambda w: run_bm25(w, f"paths.outputs={w.base / 'afile'}"),
      ("is a file, not a folder",))
    c("dataset.root empty", "stop", args=lambda w: run_bm25(w, "dataset.root="), expect=("dataset.root",))
    c("overlapping fan-in bins", "stop", args=lambda w: run_bm25(w, "fan_in_bins=[{name:a,lo:1,hi:2},{name:b,lo:2,hi:null}]"), expect=("fan_in_bins",))
    c("unresolved_refs=maybe", "stop", args=lambda w: run_bm25(w, "dataset.unresolved_refs=maybe"), expect=("unresolved_refs",))
    c("chunk_overlap larger than chunk_tokens", "stop", args=lambda w: run_bm25(w, "system.chunk_overlap=5000"), expect=("chunk",))
    c("an option Hydra cannot parse", "stop", args=lambda w: run_bm25(w, "k=[5"), expect=("k=[5",))
    c("an unknown command-line flag", "stop", args=lambda w: ["run", "--stagez", "index", *w.ov("system=bm25")], expect=("--stagez",))
    c("an unknown judge", "stop", args=lambda w: ["run", "--stages", "index,retrieve,evaluate,judge", *w.ov("system=bm25", "answer.judges=[oracle_judge]")],
      expect=("oracle_judge",))
    c("a changed k gets its own run (never overwrites)", "survive", args=lambda w: run_bm25(w, "k=3"), prepare=run_bm25,
      check=lambda w, r: len(w.folders()) == 2 and metrics_ok(w, r))
    # ------------------------------------------------------------------ interruption, concurrency
    i = lambda *a, **k: F.append(Fault("interruption", *a, **k))
    i("Ctrl-C while model calls hang", "stop", args=lambda w: [], runner=interrupt_runner(
        lambda w, s: answer_args(w, s, "answer.per_domain_type=null", "reader_llm.concurrency=2", "reader_llm.timeout_s=300"),
        after=lambda w, calls: len(calls) >= 4, hang_after=3), expect=("interrupted", "run the same command again"))
    i("Ctrl-C during the dense embedding", "stop", args=lambda w: [], runner=interrupt_runner(
        lambda w, s: ["run", *w.ov("system=dense", "embedder.threads=1")], after=lambda w, calls: (w.out / "cache").exists()),
      expect=("interrupted",))
    i("Ctrl-C during retrieval", "stop", args=lambda w: [], runner=interrupt_runner(
        lambda w, s: ["run", *w.ov("system=bm25")], after=lambda w, calls: bool(list(w.out.glob("index/**/index.json")))), expect=("interrupted",))
    i("the rerun after Ctrl-C resumes", "survive", args=run_bm25, prepare=lambda w: ["run", "--stages", "index", *w.ov("system=bm25")],
      setup=lambda w: None, check=metrics_ok)
    F.append(Fault("concurrency", "two runs of the same system at once", "survive", args=lambda w: [], runner=concurrent_runner, check=metrics_ok))
    F.append(Fault("concurrency", "a leftover lock file from a killed run", "survive",
                   setup=lambda w: [p.with_name(p.name + ".lock").write_text("12345") for p in w.out.glob("index/**/index.json")],
                   args=run_bm25, prepare=run_bm25, check=metrics_ok))
    # ------------------------------------------------------------------ endpoints
    e = lambda *a, **k: F.append(Fault("endpoint", *a, **k))
    e("endpoint that does not answer (closed port)", "stop", args=lambda w: ["run", "--stages", "index,retrieve,evaluate,answer",
      *w.ov("system=bm25", "answer.per_domain_type=1", "reader_llm=vllm", "reader_llm.base_url=http://127.0.0.1:9/v1", "reader_llm.model=m",
            "reader_llm.context_tokens=4096")], expect=("127.0.0.1:9", "does not answer"))
    e("endpoint that serves another model", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096", "reader_llm.model=not-served"), model="served-7b"),
      expect=("not-served",))
    e("reply that claims JSON and is not", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096"), fault="bad_json"), expect=("not json",))
    e("HTML error page as a reply", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096"), fault="html"), expect=("not a chat completion",))
    e("empty replies (no choices)", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096"), fault="no_choices"), expect=("no choices",))
    e("null content replies", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096"), fault="null_content"), expect=("content is null",))
    e("a model whose context window is unknown", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s), model="my-finetune"), expect=("context_tokens",))
    e("a reasoning model's parameter rules", "survive", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096"), reasoning=True), check=lambda w, r: bool(w.folders()))
    e("a cut (length-limited) reply", "survive", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096"), fault="cut"), check=lambda w, r: bool(w.folders()))
    e("openai without a key in the environment", "stop", args=lambda w: [], runner=with_standin(
        lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096", provider="openai")), env={"OPENAI_API_KEY": ""},
      expect=("openai_api_key",))
    # ------------------------------------------------------------------ caches and outputs
    k = lambda *a, **kw: F.append(Fault("caches", *a, **kw))
    k("LLM cache overwritten whole", "survive", lambda w: next(w.out.glob("llm_cache/*.sqlite")).write_bytes(b"junk" * 4000), args=lambda w: [],
      runner=with_standin(lambda w, s: answer_args(w, s, "reader_llm.context_tokens=4096")),
      prepare="answers", check=lambda w, r: "llm cache is damaged" in (r.stdout + r.stderr).lower())
    k("embedding cache overwritten whole", "survive", lambda w: [(w.out / "cache" / "embeddings.sqlite").write_bytes(b"\x00junk" * 4000),
      shutil.rmtree(w.out / "index"), *[shutil.rmtree(f) for f in w.folders()]],   # nothing built: the rebuild needs the cache
      run_dense, prepare=run_dense, check=lambda w, r: metrics_ok(w, r) and "embedding cache is damaged" in (r.stdout + r.stderr).lower())
    k("packs file cut in half", "survive", lambda w: [f.write_bytes(f.read_bytes()[: f.stat().st_size // 2]) for f in w.out.glob("faults/*/packs.jsonl.gz")],
      run_bm25, prepare=run_bm25, check=metrics_ok)
    k("packs file cut, evaluate alone", "stop", lambda w: [f.write_bytes(f.read_bytes()[: f.stat().st_size // 2]) for f in w.out.glob("faults/*/packs.jsonl.gz")],
      lambda w: ["run", "--stages", "evaluate", *w.ov("system=bm25")], ("packs.jsonl.gz", "--stages retrieve"), prepare=run_bm25)
    k("metrics.csv overwritten", "survive", lambda w: [f.write_text("garbage\x00") for f in w.out.glob("faults/*/metrics.csv")],
      run_bm25, prepare=run_bm25, check=metrics_ok)
    k("manifest.json overwritten", "survive", lambda w: [f.write_text("{not json") for f in w.out.glob("faults/*/manifest.json")],
      run_bm25, prepare=run_bm25, check=metrics_ok)
    k("stamps.json overwritten", "survive", lambda w: [f.write_text("{not json") for f in w.out.glob("faults/*/stamps.json")],
      run_bm25, prepare=run_bm25, check=metrics_ok)
    k("index.json overwritten", "survive", lambda w: [f.write_text("{not json") for f in w.out.glob("index/**/index.json")],
      run_bm25, prepare=run_bm25, check=metrics_ok)
    k("index data file cut", "survive", lambda w: [f.write_bytes(f.read_bytes()[:100]) for f in w.out.glob("index/**/bm25/tokens.json.gz")],
      run_bm25, prepare=run_bm25, check=metrics_ok)
    k("faiss index file cut", "survive", lambda w: [f.write_bytes(f.read_bytes()[:100]) for f in w.out.glob("index/**/windows.faiss")],
      run_dense, prepare=run_dense, check=metrics_ok)
    k("index folder deleted", "survive", lambda w: shutil.rmtree(w.out / "index"), run_bm25, prepare=run_bm25, check=metrics_ok)
    k("a run folder deleted", "survive", lambda w: [shutil.rmtree(f) for f in w.folders()], run_bm25, prepare=run_bm25, check=metrics_ok)
    k("a half-written partial packs file", "survive",
      lambda w: [(f / "packs.partial.jsonl").write_text(gzip.decompress((f / "packs.jsonl.gz").read_bytes()).decode()[:300]) or (f / "packs.jsonl.gz").unlink()
                 for f in w.folders()], run_bm25, prepare=run_bm25, check=metrics_ok)
    # ------------------------------------------------------------------ secrets
    s = lambda *a, **kw: F.append(Fault("secrets", *a, **kw))
    s("a key inside the endpoint URL", "survive", args=lambda w: [], runner=with_standin(
        lambda w, st: answer_args(w, st, "reader_llm.context_tokens=4096", url=st.base_url.replace("://", f"://lab:{CANARY}@"))),
      check=lambda w, r: bool(w.folders()))
    s("a key in the environment (openai)", "survive", args=lambda w: [], runner=with_standin(
        lambda w, st: answer_args(w, st, "reader_llm.context_tokens=4096", provider="openai")), env={"OPENAI_API_KEY": CANARY},
      check=lambda w, r: bool(w.folders()))
    s("a key written into an override", "stop", args=lambda w: run_bm25(w, f"+api_key={CANARY}"), expect=("api_key",))
    # the kinds kept in their own files (tests/faults_*.py, each with `extra_faults() -> list[Fault]`)
    import importlib
    for mod in sorted(p.stem for p in (ROOT / "tests").glob("faults_*.py")):
        F += importlib.import_module(mod).extra_faults()
    return F


def classify(f: Fault, w: Work, r, before: dict) -> str:
    text = (r.stdout or "") + (r.stderr or "")
    if "Traceback (most recent call last)" in text: return "raw traceback"
    leaked = CANARY in text or any(CANARY.encode() in p.read_bytes() for p in w.base.rglob("*") if p.is_file() and p.stat().st_size < 50_000_000
                                   and "wgb" not in p.parts)
    if leaked: return "leak"
    lost = [p for p, size in before.items() if not Path(p).exists() and not list(Path(p).parent.glob(Path(p).name + ".damaged-*"))]
    if f.kind == "stop":
        if r.returncode == 0: return "silent wrong result"
        return "stopped (clear)" if all(x.lower() in text.lower() for x in f.expect) else "unclear error"
    if r.returncode != 0: return "stopped (clear)" if "error" in text.lower() else "unclear error"
    if not f.check(w, r): return "silent wrong result"
    return "data lost" if lost and f.category not in ("caches", "data", "config") else "survived"


def run_fault(f: Fault, keep: bool = False) -> dict:
    base = Path(tempfile.mkdtemp(prefix="fanin-fault-"))
    w = Work(base)
    t0 = time.time()
    try:
        if f.prepare == "answers":
            from openai_standin import StandIn
            with StandIn() as st: w.run(answer_args(w, st, "reader_llm.context_tokens=4096"))
        elif f.prepare is not None: w.run(f.prepare(w))
        before = {str(p): p.stat().st_size for p in w.out.glob("faults/*/answers-*/answers.jsonl")}
        f.setup(w)
        r = f.runner(w, f) if f.runner else w.run(f.args(w), env=f.env)
        outcome = classify(f, w, r, before)
        said = (r.stderr if r.returncode else r.stdout) or ""   # what the user reads last: the error, or the run's last line
        tail = (said.strip().splitlines() or [""])[-1][:240]
    except subprocess.TimeoutExpired as e:   # the command did not end within its time: a hang, never a pass
        outcome, tail = "hang", f"no exit within {e.timeout:g} s: {' '.join(map(str, e.cmd))[:200]}"
    except Exception as e:   # the fault run's own failure is reported, not hidden
        outcome, tail = "harness error", f"{type(e).__name__}: {e}"[:240]
    finally:
        if not keep: shutil.rmtree(base, ignore_errors=True)
    return {"category": f.category, "fault": f.name, "expected": f.kind, "outcome": outcome, "seconds": round(time.time() - t0, 1),
            "message": tail}


def machine() -> str:
    "The machine the run was made on, as the README's Measured table names machines: cores, CPU model, memory."
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "unknown CPU")
    mem = next((int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")), 0)
    return f"{os.cpu_count()} cores, {cpu}, {mem / 2**20:.0f} GB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="run the faults whose name contains this text")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep each fault's workspace")
    a = ap.parse_args(argv)
    # the code the faults run against: the commit at the start, marked dirty when the tree differs from it
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rows = []
    for f in faults():
        if a.only and a.only.lower() not in f.name.lower(): continue
        r = run_fault(f, a.keep)
        rows.append(r)
        print(f"{r['outcome']:<20} {r['category']:<13} {r['fault']:<55} {r['seconds']:>6.1f}s  {r['message'][:120]}", flush=True)
    counts = {}
    for r in rows: counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print(f"faults={len(rows)} " + " ".join(f"{k.replace(' ', '_')}={v}" for k, v in sorted(counts.items())))
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "machine": machine(), "commit": commit, "faults": len(rows),
                                            "counts": counts, "rows": rows}, indent=1))
    bad = sum(v for k, v in counts.items() if k not in ("survived", "stopped (clear)"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
