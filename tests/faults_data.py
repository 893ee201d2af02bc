"""Data faults whose shape is fine and whose meaning is not: a page that is not a regular file (a read would block or never end),
a page of control bytes that still decodes as UTF-8, a summary's gold statement written twice, one URL listed under two titles (one document counted as two), and in
HippoRAG's layout a corpus title written twice and a gold passage written twice. Each runs through the real `fanin` command on
a fresh copy of the fixture (`tests/fault_run.py` collects them with the other kinds)."""
from __future__ import annotations

import gzip
import json
import os
import shutil

from fault_run import QA, ROOT, TOPIC, Fault, line, metrics_ok, page, run_bm25

BOLAVEN = ("bolaven damage in korea.txt",)
HIPPORAG_FIXTURE = ROOT / "tests" / "fixtures" / "hipporag_tiny"


def _replace_page(make):
    def setup(w):
        p = page(w)
        p.unlink()
        make(p)
    return setup


def _same_url(w):
    "A second title for the url of question 1 (and of the summary question), with its own page: the same article fetched twice."
    refs = w.data / TOPIC / "references.jsonl"
    refs.write_text(refs.read_text() + json.dumps({"title": "Vicente: Hong Kong raises Signal 10", "url": "https://example.org/vicente",
                                                   "archive_url": ""}) + "\n")
    page(w, "Vicente Hong Kong raises Signal 10.txt").write_text(
        "# Vicente: Hong Kong raises Signal 10\n\nThe Hong Kong Observatory raised Hurricane Signal No. 10 for Typhoon Vicente.\n")


def _fan_in_counts_documents(w, r) -> bool:
    "The run is complete, every question keeps the fan-in it had with one title per url, and the run said what it decided."
    if not metrics_ok(w, r): return False
    import pandas as pd
    fan = sorted(int(x) for f in w.folders() for x in pd.read_csv(f / "metrics.csv").fan_in)
    return fan == [0, 1, 2, 3] and "listed under several titles" in (r.stdout + r.stderr)


# ---------------------------------------------------------------- HippoRAG's layout, on a copy of its fixture
def _hipporag(w):
    return w.base / "hipporag"


def run_hipporag(w, *extra):
    return run_bm25(w, "dataset=hipporag", f"dataset.root={_hipporag(w)}", "dataset.domains=all", *extra)


def _with_hipporag(edit):
    def setup(w):
        shutil.copytree(HIPPORAG_FIXTURE, _hipporag(w))
        edit(_hipporag(w))
    return setup


def _title_twice(d):
    c = d / "tinyhotpot_corpus.json"
    c.write_text(c.read_text().rstrip()[:-1].rstrip() + ',\n "Grey Sea": ["The Grey Sea is a warm sea."]\n}\n')


def _gold_passage_twice(d):
    c = d / "tinymusique_corpus.json"
    ps = json.loads(c.read_text())
    c.write_text(json.dumps(ps + [dict(ps[1])], indent=1))   # "Mara Voss", gold for both MuSiQue questions


def _duplicate_read_once(w, r) -> bool:
    if not metrics_ok(w, r): return False
    packs = [json.loads(x) for f in w.folders() for x in gzip.decompress((f / "packs.jsonl.gz").read_bytes()).splitlines()]
    ids = {u["doc_id"] for p in packs for u in p.get("units", [])}
    return "repeat an earlier one exactly" in (r.stdout + r.stderr) and not any(i.startswith("Mara Voss #") for i in ids)


def extra_faults() -> list:
    F = []
    d = lambda *a, **k: F.append(Fault("data", *a, **k))
    d("a page that is a FIFO (named pipe)", "stop", _replace_page(os.mkfifo), run_bm25, BOLAVEN + ("fifo",))
    d("a folder where a page should be", "stop", _replace_page(lambda p: p.mkdir()), run_bm25, BOLAVEN + ("folder",))
    d("a page linked to a device (/dev/zero)", "stop", _replace_page(lambda p: p.symlink_to("/dev/zero")), run_bm25, BOLAVEN + ("device",))
    d("the questions file is a FIFO", "stop", lambda w: [(w.data / QA).unlink(), os.mkfifo(w.data / QA)], run_bm25, ("questions.jsonl", "fifo"))
    d("a gold page of control bytes", "stop",
      lambda w: page(w).write_bytes(b"# Bolaven damage in Korea\n" + bytes(range(0, 9)) * 400 + b"\x1b[0m" * 80 + b" Bolaven\n"),
      run_bm25, BOLAVEN + ("control",))
    d("a summary's gold statement written twice", "stop",
      lambda w: line(w.data / QA, 3, lambda l: l.replace('South Jeolla."]', 'South Jeolla.", "Vicente injured over 130 people in Hong Kong."]')),
      run_bm25, ("line 3", "gold_statements[2]"))
    d("one URL claimed by two references (two titles)", "survive", _same_url, run_bm25, check=_fan_in_counts_documents)
    d("HippoRAG corpus title written twice, texts differ", "stop", _with_hipporag(_title_twice), run_hipporag,
      ("tinyhotpot_corpus.json", "grey sea", "tinyhotpot.json record 1"))
    d("HippoRAG gold passage written twice", "survive", _with_hipporag(_gold_passage_twice), run_hipporag, check=_duplicate_read_once)
    d("HippoRAG questions file is a FIFO", "stop", _with_hipporag(lambda d: [(d / "tinymusique.json").unlink(), os.mkfifo(d / "tinymusique.json")]),
      run_hipporag, ("tinymusique.json", "fifo"))
    return F
