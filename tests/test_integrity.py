"""Results cannot go stale: a run into an existing outputs folder after a change of the data, of fanin's code or of a model
file recomputes what depends on it (or refuses, under integrity.on_change=refuse), and never leaves a metrics.csv made
from the old inputs under a manifest naming the new ones. Each test fails on the code before stamps existed."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import fanin.run.pipeline as pipeline
from fanin.doors.cli import main
from fanin.core.fingerprints import StaleOutputs, code_fingerprint, read_stamps
from fanin.run.pipeline import run
from fanin.run.components import index_store
from fanin.core.schema import Pack, read_jsonl

from conftest import SHARED_MODELS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "wildgraphbench_tiny"


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(FIXTURE, root)
    return root


def _over(tmp_path, root, *more):
    return [f"dataset.root={root}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}", "progress=false",
            "experiment_name=t", "system=bm25", "k=1", "k_summary=1", SHARED_MODELS, *more]


def _repoint_first_question(root: Path):
    "A data change that changes the gold: the single-fact question now cites the Saola page instead of Vicente's."
    q = root / "QA" / "nature" / "questions.jsonl"
    q.write_text(q.read_text().replace('"ref_urls": ["https://example.org/vicente"]', '"ref_urls": ["https://example.org/saola"]', 1))


def _metrics(f: Path) -> pd.DataFrame:
    return pd.read_csv(f / "metrics.csv").drop(columns=["retrieve_ms"]).sort_values("instance_id").reset_index(drop=True)


def test_a_data_change_recomputes_and_equals_a_fresh_run(data, tmp_path, capsys):
    f = run(_over(tmp_path, data))[0]
    before = _metrics(f)
    _repoint_first_question(data)
    f2 = run(_over(tmp_path, data))[0]
    assert f2 == f and "were made from other inputs: questions" in capsys.readouterr().out
    after = _metrics(f)
    assert not after.equals(before)
    fresh = _metrics(run(_over(tmp_path / "fresh", data))[0])
    pd.testing.assert_frame_equal(after, fresh)
    manifest = json.loads((f / "manifest.json").read_text())
    assert manifest["inputs"] == read_stamps(f)["retrieve"]          # the manifest names the inputs the numbers came from


def test_a_page_change_rebuilds_the_index(data, tmp_path):
    over = _over(tmp_path, data)
    run(over)
    from fanin.core.config import compose
    store = index_store(compose(over), "nature")
    old = json.loads((store / "inputs.json").read_text())["index"]["corpus"]
    page = next((data / "corpus" / "nature").rglob("Season summary 2012.txt"))
    page.write_text(page.read_text() + "\nA late addition to the page.")
    run(over)
    new = json.loads((store / "inputs.json").read_text())["index"]["corpus"]
    assert new != old


def test_a_code_change_recomputes(data, tmp_path, monkeypatch, capsys):
    f = run(_over(tmp_path, data))[0]
    packs_mtime = (f / "packs.jsonl.gz").stat().st_mtime_ns
    monkeypatch.setattr(pipeline, "code_fingerprint", lambda: "0123456789abcdef")
    run(_over(tmp_path, data))
    assert "code " in capsys.readouterr().out
    assert (f / "packs.jsonl.gz").stat().st_mtime_ns != packs_mtime
    assert read_stamps(f)["retrieve"]["code"] == "0123456789abcdef"


def test_refuse_keeps_the_old_outputs_and_names_what_changed(data, tmp_path, capsys):
    f = run(_over(tmp_path, data))[0]
    before = (f / "metrics.csv").read_bytes()
    _repoint_first_question(data)
    with pytest.raises(StaleOutputs, match=r"questions .*integrity.on_change=recompute"):
        run(_over(tmp_path, data, "integrity.on_change=refuse"))
    assert (f / "metrics.csv").read_bytes() == before
    with pytest.raises(SystemExit) as e: main(["run", *_over(tmp_path, data, "integrity.on_change=refuse")])
    assert e.value.code != 0 and "made from other inputs" in capsys.readouterr().err


def test_an_answer_only_rerun_after_a_data_change_asks_for_retrieval(data, tmp_path):
    run(_over(tmp_path, data))
    _repoint_first_question(data)
    from fanin.core.config import ConfigError
    with pytest.raises(ConfigError, match="run the retrieve stage"):
        run(_over(tmp_path, data, "answer.judges=[proxy]"), stages=["judge"])


def test_the_code_fingerprint_sees_every_package_file(tmp_path, monkeypatch):
    import fanin
    pkg = tmp_path / "fanin"
    shutil.copytree(Path(fanin.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fanin, "__file__", str(pkg / "__init__.py"))
    a = code_fingerprint.__wrapped__()
    (pkg / "systems" / "flat.py").write_text((pkg / "systems" / "flat.py").read_text() + "\n# a change\n")
    assert code_fingerprint.__wrapped__() != a


# --- failures heal -------------------------------------------------------------------------------------------------------

def _flaky(monkeypatch, when):
    from fanin.systems import flat as systems
    real = systems.BM25System.retrieve
    def retrieve(self, query, k, instance=None):
        if when(query): raise ConnectionError("transient: index server unreachable")
        return real(self, query, k, instance)
    monkeypatch.setattr(systems.BM25System, "retrieve", retrieve)


def test_a_rerun_retries_only_the_failed_questions(data, tmp_path, monkeypatch):
    from fanin.run.pipeline import StageFailed
    _flaky(monkeypatch, lambda q: "Saola" in q)
    with pytest.raises(StageFailed, match="1 of 4 questions failed.*rerun to retry"): run(_over(tmp_path, data))
    (f,) = [p for p in (tmp_path / "outputs" / "t").iterdir() if p.is_dir()]
    kept = {p.instance_id: p.cost["retrieve_ms"] for p in read_jsonl(f / "packs.jsonl.gz", Pack)}
    assert len(kept) == 3 and json.loads((f / "manifest.json").read_text())["finished"] is None
    monkeypatch.undo()
    run(_over(tmp_path, data))                                          # healthy again: exits normally
    again = {p.instance_id: p.cost["retrieve_ms"] for p in read_jsonl(f / "packs.jsonl.gz", Pack)}
    assert len(again) == 4 and all(again[i] == ms for i, ms in kept.items())   # the 3 finished packs were not redone
    m = pd.read_csv(f / "metrics.csv")
    assert (m.status == "ok").all()
    assert not (f / "failures.jsonl").exists() or not (f / "failures.jsonl").read_text().strip()


def test_a_stage_where_everything_failed_exits_non_zero_and_the_folder_stays_usable(data, tmp_path, monkeypatch):
    from fanin.run.pipeline import StageFailed
    _flaky(monkeypatch, lambda q: True)
    with pytest.raises(StageFailed, match="4 of 4 questions failed"): run(_over(tmp_path, data))
    (f,) = [p for p in (tmp_path / "outputs" / "t").iterdir() if p.is_dir()]
    summary = json.loads((f / "manifest.json").read_text())["summary"]
    assert summary["failed"] == 4 and summary["er"] is None            # no failure turned into a 0
    with pytest.raises(StageFailed): run(_over(tmp_path, data))          # still failing: still non-zero, no crash
    monkeypatch.undo()
    run(_over(tmp_path, data))
    assert (pd.read_csv(f / "metrics.csv").status == "ok").all()


# --- concurrency -----------------------------------------------------------------------------------------------------

_RUN = """
import sys, time
from fanin.systems import flat as systems
from fanin.run.pipeline import run
real = systems.BM25System._build
def slow(self, corpus, folder):          # a slow index build, so the two processes overlap
    time.sleep(float(sys.argv[1])); return real(self, corpus, folder)
systems.BM25System._build = slow
run(sys.argv[2:])
print("done", flush=True)
"""


def test_two_runs_of_the_same_folder_take_turns_and_build_once(data, tmp_path):
    import subprocess, sys
    over = _over(tmp_path, data)
    a = subprocess.Popen([sys.executable, "-c", _RUN, "3", *over], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time; time.sleep(1.5)
    b = subprocess.Popen([sys.executable, "-c", _RUN, "3", *over], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (oa, ea), (ob, eb) = a.communicate(timeout=120), b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, ea + eb
    # the one that came second (normally b; on a loaded machine a's start-up can be the slower) said whom it waited for
    assert ("in progress in PID" in oa) != ("in progress in PID" in ob), (oa, ob)
    (f,) = [p for p in (tmp_path / "outputs" / "t").iterdir() if p.is_dir()]
    assert len(read_jsonl(f / "packs.jsonl.gz", Pack)) == 4
    from fanin.core.config import compose
    meta = json.loads((index_store(compose(over), "nature") / "index.json").read_text())
    assert meta["index_seconds"] >= 3                        # built once (by the first); the second loaded it


def test_a_second_run_told_not_to_wait_stops_at_once_naming_the_holder(data, tmp_path):
    from fanin.core.config import compose
    from fanin.core.locks import exclusive
    from fanin.run.components import load_dataset, run_dir
    over = _over(tmp_path, data, "integrity.wait_for_lock=false")
    cfg = compose(over)
    folder = run_dir(cfg, load_dataset(cfg)); folder.mkdir(parents=True)
    with exclusive(folder, "a test holder"):
        import subprocess, sys
        r = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "run", *over], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "in progress in PID" in r.stderr


# --- interruption ----------------------------------------------------------------------------------------------------

_EMBED = """
import signal, sys
# Ctrl-C as a terminal delivers it, also when the test runner was started as a background job (which starts with SIGINT ignored,
# and Python then leaves it ignored in its children)
signal.signal(signal.SIGINT, signal.default_int_handler)
from fanin.models.embeddings import EmbeddingCache, OnnxMiniLM, embed_with_cache
texts = [f"window {i}: the typhoon season of 2012 brought {i} mm of rain to the coast and damage to {i % 97} towns" for i in range(200000)]
print("start", flush=True)
embed_with_cache(OnnxMiniLM(), texts, EmbeddingCache(sys.argv[1]))
"""


def test_ctrl_c_while_embedding_stops_in_seconds_and_keeps_the_finished_batches(tmp_path):
    import signal, subprocess, sys, time
    from fanin.models.embeddings import EmbeddingCache, OnnxMiniLM
    cache, name = tmp_path / "emb.sqlite", OnnxMiniLM(threads=1).name
    p = subprocess.Popen([sys.executable, "-c", _EMBED, str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "start"
    deadline = time.time() + 180  # Ctrl-C once two commits of 256 texts are in the cache, however fast the machine embeds
    while time.time() < deadline and p.poll() is None and not (cache.exists() and EmbeddingCache(cache).count(name) >= 512):
        time.sleep(0.2)
    assert p.poll() is None, f"the embedding ended before Ctrl-C: {p.stderr.read()[-2000:]}"
    t0 = time.perf_counter(); p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    stopped_s = time.perf_counter() - t0
    assert p.returncode != 0 and stopped_s < 5, f"Ctrl-C took {stopped_s:.1f} s"
    kept = EmbeddingCache(cache).count(name)
    assert 512 <= kept < 200000, kept                      # finished batches were committed, not thrown away


_SERVE = """
from fanin.core.config import compose, instantiate
cfg = compose(["llm.server.requantize=null"])
s = instantiate(cfg.llm.server).start()
import json, threading, time, urllib.request
def generate():  # a long generation in flight when the lab dies
    body = json.dumps({"messages": [{"role": "user", "content": "Count from 1 to 5000, one number per line."}],
                       "max_tokens": 4000, "temperature": 0}).encode()
    try: urllib.request.urlopen(urllib.request.Request(s.base_url + "/chat/completions", body, {"Content-Type": "application/json"}), timeout=600)
    except Exception: pass
threading.Thread(target=generate, daemon=True).start()
time.sleep(1.5)
print(s.proc.pid, flush=True)
time.sleep(600)
"""


def test_the_embedded_server_dies_with_the_process_that_started_it(tmp_path):
    import os, signal, subprocess, sys, time
    p = subprocess.Popen([sys.executable, "-c", _SERVE], stdout=subprocess.PIPE, text=True)
    server_pid = int(p.stdout.readline())
    p.send_signal(signal.SIGKILL); p.wait()                 # the lab is killed without any chance to clean up
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 5:
        try: os.kill(server_pid, 0)
        except ProcessLookupError: break
        try:  # reap it if it became our zombie (it is not our child, so this normally raises)
            if os.waitpid(server_pid, os.WNOHANG)[0]: break
        except ChildProcessError: pass
        time.sleep(0.1)
    else:
        with open(f"/proc/{server_pid}/stat") as f: state = f.read().split()[2]
        assert state == "Z", f"the server (PID {server_pid}) still runs 5 s after its parent was killed"


# --- parameters and data are checked before any work -----------------------------------------------------------------

@pytest.mark.parametrize("bad", ["k=abc", "k=1.5", "k=0", "k=-3", "fan_in_bins=[]"])
def test_a_bad_parameter_stops_before_any_work(data, tmp_path, bad):
    from fanin.core.config import ConfigError
    with pytest.raises(ConfigError, match=bad.split("=")[0]): run(_over(tmp_path, data, bad))
    assert not (tmp_path / "outputs").exists()              # no folder, no index, no half-written run


def test_bad_data_stops_before_any_model_starts(data, tmp_path, monkeypatch):
    from fanin.core.config import ConfigError
    from fanin.models import llm as llm_mod
    started = []
    monkeypatch.setattr(llm_mod.LLM, "__enter__", lambda self: started.append(1) or self)
    q = data / "QA" / "nature" / "questions.jsonl"
    q.write_text(q.read_text().replace('"ref_urls": ["https://example.org/vicente"]', '"ref_urls": "https://example.org/vicente"', 1))
    with pytest.raises(ConfigError, match=r"questions.jsonl, line 1: field 'ref_urls'"):
        run(_over(tmp_path, data, "answer.judges=[proxy]"), stages=["index", "retrieve", "answer", "judge"])
    assert not started and not (tmp_path / "outputs").exists()


def test_a_build_that_fails_is_recorded_the_others_run_and_the_next_run_heals_it(data, tmp_path, monkeypatch):
    "A system whose index cannot be built: recorded in its run folder, the other systems still run, the tables show it as failed."
    from fanin.systems import flat as systems
    from fanin.core.config import ConfigError
    from fanin.results.experiments import cost_table, finished_runs
    from fanin.run.build_failures import index_failures
    from fanin.run.pipeline import StageFailed
    def broken(self, corpus, folder): raise RuntimeError("no entities detected during extraction")
    monkeypatch.setattr(systems.BM25System, "_build", broken)
    over = _over(tmp_path, data, "systems=[bm25,dense]")
    with pytest.raises(StageFailed, match=r"1 index build\(s\) failed \(max_failed_builds=0\).*index bm25 on nature failed: "
                                          r"RuntimeError: no entities detected.*the next run retries it"):
        run(over)
    bm, de = finished_runs(over, failed_builds=True)
    assert (de / "metrics.csv").exists() and not (bm / "metrics.csv").exists()          # dense ran after bm25 failed
    rec = index_failures(bm)["nature"]
    assert rec["error"] == "RuntimeError: no entities detected during extraction" and rec["seconds"] >= 0
    assert json.loads((bm / "manifest.json").read_text())["finished"] is None
    with pytest.raises(ConfigError, match="no finished run"): finished_runs(over)        # a table that needs metrics refuses
    c = cost_table([bm, de])
    assert list(c.status) == ["index failed", "ok"] and pd.isna(c.units.iloc[0]) and c.units.iloc[1] > 0   # missing, not 0
    run(over + ["max_failed_builds=1"])                    # within the allowance: exits normally, and the failure stays recorded
    assert index_failures(bm)
    monkeypatch.undo()
    run(over)                                              # the build works again: retried, and the record is cleared
    assert not index_failures(bm) and (bm / "metrics.csv").exists()
    assert list(cost_table([bm, de]).status) == ["ok", "ok"]


def test_keys_hold_content_not_locations():
    "Moving outputs/ (or pointing paths.outputs elsewhere) keeps every system's key: model files count by content, not folder."
    from fanin.core.config import compose, system_hash
    for system in ("dense", "hybrid", "graal"):
        a, b = (compose([f"system={system}", f"paths.outputs=/tmp/{x}"]) for x in ("here", "elsewhere"))
        assert system_hash(a) == system_hash(b), system


# --- unfinished artifacts ----------------------------------------------------------------------------------------------
# Every artifact of a run counts as finished only with its completion record (fanin.core.files): a file cut at a line end parses,
# so only the record can tell it from a whole one. Each test fails on the code before completion records existed.
import errno, os
from fanin.core.files import finished


def _whole_rerun(tmp_path, data, capsys, f):
    "Rerun; return what it printed and require every artifact finished and all 4 questions in the metrics."
    run(_over(tmp_path, data))
    said = capsys.readouterr().out
    for a in ("metrics.csv", "packs.jsonl.gz", "manifest.json", "stamps.json", "tables/by_fan_in_bin.csv"): assert finished(f / a), a
    assert len(pd.read_csv(f / "metrics.csv")) == 4
    return said


@pytest.mark.parametrize("cut", ["line end", "mid-row"])
def test_a_metrics_table_cut_after_a_finished_run_is_redone_and_said(data, tmp_path, capsys, cut):
    (f,) = run(_over(tmp_path, data))
    m, before = f / "metrics.csv", _metrics(f)
    whole = m.read_text()
    m.write_text("".join(whole.splitlines(keepends=True)[:3]) if cut == "line end" else whole[: len(whole) // 2])
    capsys.readouterr()
    said = _whole_rerun(tmp_path, data, capsys, f)
    assert "metrics.csv: the metrics table is unfinished (it is" in said and "cut or changed after it was written" in said
    pd.testing.assert_frame_equal(_metrics(f), before)                # every row, the same values
    assert list(f.glob("metrics.csv.damaged-*"))                       # the cut file is kept aside, not deleted


def test_a_full_disk_while_writing_metrics_keeps_the_old_table_and_the_rerun_heals(data, tmp_path, capsys, monkeypatch):
    (f,) = run(_over(tmp_path, data))
    m = f / "metrics.csv"
    old = m.read_bytes()
    later = m.stat().st_mtime + 10
    os.utime(f / "packs.jsonl.gz", (later, later))                     # newer packs: the evaluate stage writes the table again
    real = pd.DataFrame.to_csv
    def full(self, buf=None, *a, **k):                                  # half the table, then the disk is full
        if hasattr(buf, "write"): buf.write(real(self, None, *a, **k)[:40])
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    with pytest.raises(OSError, match="No space left"): run(_over(tmp_path, data), stages=["evaluate"])
    assert m.read_bytes() == old and finished(m)                       # the last good table, still whole
    assert not [p for p in f.iterdir() if p.name.endswith(".tmp")]    # no temporary file left behind
    monkeypatch.undo()
    _whole_rerun(tmp_path, data, capsys, f)


@pytest.mark.parametrize("name", ["manifest.json", "stamps.json"])
def test_a_cut_json_artifact_is_set_aside_and_written_again(data, tmp_path, capsys, name):
    (f,) = run(_over(tmp_path, data))
    p = f / name
    p.write_text(p.read_text()[:50])
    capsys.readouterr()
    said = _whole_rerun(tmp_path, data, capsys, f)                    # no JSONDecodeError
    assert f"{name}: the " in said and "is unfinished" in said and list(f.glob(f"{name}.damaged-*"))
    assert json.loads((f / "manifest.json").read_text())["inputs"] == read_stamps(f)["retrieve"]


def test_a_packs_file_cut_at_a_line_end_is_never_read_as_all_the_packs(data, tmp_path, capsys):
    import gzip
    (f,) = run(_over(tmp_path, data))
    p = f / "packs.jsonl.gz"
    p.write_bytes(gzip.compress(b"".join(gzip.decompress(p.read_bytes()).splitlines(keepends=True)[:2])))   # valid gzip, 2 of 4
    with pytest.raises(pipeline.DamagedFile, match="packs.jsonl.gz is damaged .*completion record"):
        run(_over(tmp_path, data), stages=["evaluate"])
    capsys.readouterr()
    said = _whole_rerun(tmp_path, data, capsys, f)
    assert "packs.jsonl.gz" in said and len(read_jsonl(p, Pack)) == 4


def test_a_folder_from_before_completion_records_is_redone_once(data, tmp_path, capsys):
    (f,) = run(_over(tmp_path, data))
    for r in list((tmp_path / "outputs").rglob(".*.done")): r.unlink()   # what a run before completion records left
    capsys.readouterr()
    said = _whole_rerun(tmp_path, data, capsys, f)
    assert "no completion record" in said
    assert "unfinished" not in _whole_rerun(tmp_path, data, capsys, f)  # once: the next run reuses everything
