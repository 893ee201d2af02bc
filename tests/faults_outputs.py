"""Fault kinds for a run's own outputs: an artifact cut after a finished run — at a line end (what a killed copy or a partial
restore leaves, and what a reader cannot tell from a whole file) or in the middle of a row or a JSON object — is never read as
finished. The rerun names what it redoes and why, redoes it, and ends with every row of the result, equal to the run before
the damage. `tests/fault_run.py` collects these with the others (`extra_faults`)."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pandas as pd

from fault_run import Fault, run_bm25


def _stash(w) -> Path:
    "Keep the finished run's outputs aside, to compare the healed run with."
    good = w.base / "good"
    shutil.rmtree(good, ignore_errors=True)
    shutil.copytree(w.folders()[0], good)
    return good


def _cut_lines(path: Path, keep: int):
    "Keep the first `keep` lines: a file cut exactly at a line end, which no parser notices."
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:keep]), encoding="utf-8")


def _cut_middle(path: Path):
    b = path.read_bytes()
    path.write_bytes(b[: len(b) // 2])


def _frame(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path)
    df = df.drop(columns=[c for c in df.columns if c.endswith("_ms")])   # timings differ between runs; nothing else may
    return df.sort_values(list(df.columns[:2])).reset_index(drop=True)


def same_result(w, r, said: str | None = "unfinished") -> bool:
    """The healed run's metrics and tables hold every row of the run before the damage, with the same values; its packs and
    manifest are finished; and, when `said` is given, the rerun said what it redid."""
    from fanin.core.files import finished
    good, folders = w.base / "good", w.folders()
    if len(folders) != 1: return False
    f = folders[0]
    arts = ["metrics.csv", "packs.jsonl.gz", "manifest.json", "stamps.json", *(f"tables/{p.name}" for p in (good / "tables").glob("*.csv"))]
    if not all(finished(f / a) for a in arts): return False
    if gzip.decompress((f / "packs.jsonl.gz").read_bytes()).count(b"\n") != gzip.decompress((good / "packs.jsonl.gz").read_bytes()).count(b"\n"):
        return False
    for a in arts:
        if a.endswith(".csv"):
            try: pd.testing.assert_frame_equal(_frame(f / a), _frame(good / a))
            except AssertionError: return False
    return said is None or said in (r.stdout + r.stderr)


def _damage(fn):
    "Stash the finished run, then damage it with `fn(run folder)`."
    def setup(w):
        _stash(w)
        fn(w.folders()[0])
    return setup


def _cut_packs_at_line_end(f: Path):
    p = f / "packs.jsonl.gz"
    lines = gzip.decompress(p.read_bytes()).splitlines(keepends=True)
    p.write_bytes(gzip.compress(b"".join(lines[:2])))   # a valid gzip file holding 2 of the 4 packs


def extra_faults() -> list[Fault]:
    k = lambda name, fn, said="unfinished": Fault("caches", name, "survive", _damage(fn), run_bm25, prepare=run_bm25,
                                                   check=lambda w, r: same_result(w, r, said))
    return [
        k("metrics.csv cut at a line end after a finished run", lambda f: _cut_lines(f / "metrics.csv", 3)),
        k("metrics.csv cut mid-row", lambda f: _cut_middle(f / "metrics.csv")),
        k("packs file cut at a line end", _cut_packs_at_line_end, said="packs.jsonl.gz"),
        k("stamps.json cut", lambda f: _cut_middle(f / "stamps.json")),
        k("manifest.json cut", lambda f: _cut_middle(f / "manifest.json")),
        k("a table CSV cut", lambda f: _cut_lines(f / "tables" / "by_fan_in_bin.csv", 2), said=None),   # tables are rewritten on every run
        Fault("interruption", "a killed metrics write (temporary file left, table cut)", "survive",
              _damage(lambda f: [(f / ".metrics.csv.x.99999.tmp").write_text("instance_id,er\n"), _cut_lines(f / "metrics.csv", 2)]),
              run_bm25, prepare=run_bm25, check=lambda w, r: same_result(w, r)),
    ]
