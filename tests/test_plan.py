"`fanin plan`: the model work of a run, counted without calling a model, on the hand-made fixture (real caches, real tokenizer)."
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fanin.core.config import ConfigError, compose
from fanin.run.components import load_dataset
from fanin.models.embeddings import EmbeddingCache, text_key
from fanin.run.plan import Planner, embedder_name, light_system, plan, window_texts

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ["experiment=authtrace_fixture", "progress=false"]


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    return out, plan(FIXTURE + [f"paths.outputs={out}"])


def test_every_stage_and_system_is_planned(cold):
    _, p = cold
    n = len(load_dataset(compose(FIXTURE)).instances())
    llm = p.rows[p.rows.kind == "llm"]
    assert set(llm.system) == {"bm25", "dense", "long_context", "oracle", "closed_book"}
    assert llm.requests.sum() == 5 * n and llm.cached.sum() == 0          # one answer a question and system, none cached
    assert (llm.prompt_tokens > 0).all() and (llm.completion_tokens > 0).all()
    exact = llm.set_index("system").basis.str.startswith("exact")
    assert exact["oracle"].all() and exact["long_context"].all() and not exact["bm25"].any()   # stand-in packs say so
    emb = p.rows[(p.rows.kind == "embed") & (p.rows.stage == "index")]
    assert set(emb.system) == {"dense"} and emb.to_do.sum() > 0
    assert p.seconds() > 0 and all(p.rows[p.rows.to_do > 0].rate_source != "")


def test_cached_windows_are_found_by_their_real_key(cold, tmp_path):
    out, _ = cold
    cfg = compose(FIXTURE + ["system=dense", f"paths.outputs={tmp_path}"])
    ds = load_dataset(cfg)
    texts = window_texts(light_system(cfg), ds.corpus(ds.domains[0]))
    cache = EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite")
    import numpy as np
    cache.put_many(embedder_name(cfg.embedder), {text_key(t): np.zeros(384, dtype=np.float32) for t in texts})
    p = plan(FIXTURE + [f"paths.outputs={tmp_path}"], stages=["index"])
    row = p.rows[(p.rows.system == "dense") & (p.rows.domain == ds.domains[0])].iloc[0]
    assert row.cached == row.requests == len(set(texts)) and row.to_do == 0


def test_given_rate_and_bad_input():
    p = plan(FIXTURE, stages=["index"], windows_per_s=10.0)
    emb = p.rows[p.rows.kind == "embed"]
    assert (emb.rate_source == "--windows-per-s 10").all() and abs(emb.seconds.sum() - emb.to_do.sum() / 10) < 0.2
    with pytest.raises(ConfigError, match="unknown stage"): Planner(FIXTURE, stages=["index", "answers"])


def test_cli_prints_the_table_and_writes_json(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "plan", *FIXTURE, f"paths.outputs={tmp_path}", "--stages", "index,retrieve",
                        "--json", str(tmp_path / "plan.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no model was called" in r.stdout and "totals" in r.stdout
    d = json.loads((tmp_path / "plan.json").read_text())
    assert d["stages"] == ["index", "retrieve"] and d["to_do"] > 0 and {x["kind"] for x in d["rows"]} == {"embed", "none"}
    # every system of the run shows: the ones that build without a model say so (as they declare), with nothing to compute
    idle = {x["system"] for x in d["rows"] if x["kind"] == "none"}
    assert idle == {"bm25", "long_context", "oracle", "closed_book"} and "built without a model" in r.stdout


def test_a_computing_table_stops_without_run(tmp_path):
    "graal_table1 would parse the domain with spaCy: it prints the plan and stops, naming --run, before any work."
    r = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "table", "graal_table1", "dataset.root=tests/fixtures/wildgraphbench_tiny",
                        "dataset.domains=[nature]", f"paths.outputs={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    assert "parse" in r.stdout and "--run" in r.stderr and not (tmp_path / "tables").exists()
