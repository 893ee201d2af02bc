"""Peers' costs (the cost table and the bench target): the lab's cost table carries a peer's package, version and index cost
(LLM requests, server calls, tokens, seconds, bytes, environment setup), and `make bench`'s peer lines are well formed, with an
error line for a peer whose environment cannot be built while the others still run. Peers run on the tiny fixture corpus against the
loopback OpenAI-compatible stand-in (tests/openai_standin.py), never a real model."""
import gzip
import json
import re
import shutil
import sys

import pandas as pd
import pytest

from fanin.results.experiments import cost_table
from fanin.systems.peers import read_lock

from openai_standin import StandIn
from test_peers import FIXTURE, ROOT, built_env, nano_reply


def _write_run(folder, system, index, packs, metrics=None):
    "What a finished run leaves: each artifact with its completion record (fanin.core.files)."
    from fanin.core.files import atomic_write
    folder.mkdir(parents=True)
    atomic_write(folder / "manifest.json", json.dumps({"system": system, "index": index}))
    atomic_write(folder / "packs.jsonl.gz", gzip.compress("".join(json.dumps(p) + "\n" for p in packs).encode()))
    if metrics is not None: atomic_write(folder / "metrics.csv", pd.DataFrame(metrics).to_csv(index=False))


def test_cost_table_keeps_the_lab_systems_and_takes_domains_from_metrics(tmp_path):
    "A lab system: empty package columns, its own LLM cost; the question's domain comes from metrics.csv, not the id's prefix."
    st = {"index_seconds": 1.5, "index_bytes": 10, "n_units": 3, "llm_requests": 4, "llm_calls": 2, "llm_prompt_tokens": 40,
          "llm_completion_tokens": 8, "graph": {"nodes": 5, "edges": 4}}
    packs = [{"instance_id": "q1", "system": "community", "units": [], "cost": {"retrieve_ms": 2.0}},
             {"instance_id": "q2", "system": "community", "units": [], "cost": {"retrieve_ms": 4.0}},
             {"instance_id": "q3", "system": "community", "units": [], "cost": {"retrieve_ms": 100.0}}]
    _write_run(tmp_path / "r", "community", {"alpha": st, "beta": {"index_seconds": 0.1}}, packs,
               {"instance_id": ["q1", "q2", "q3"], "domain": ["alpha", "alpha", "beta"]})
    t = cost_table([tmp_path / "r"]).set_index("domain")
    assert list(t.index) == ["alpha", "beta"]
    a = t.loc["alpha"]
    assert a.package == "" and a.package_version == "" and a.retrieve_p50_ms == 3.0 and t.loc["beta"].retrieve_p50_ms == 100.0
    assert (a.llm_index_requests, a.llm_index_calls, a.llm_index_prompt_tokens, a.llm_index_completion_tokens) == (4, 2, 40, 8)
    assert a.index_seconds == 1.5 and a.index_bytes == 10 and a.units == 3 and a.nodes == 5
    assert t.loc["beta"].llm_index_requests == 0
    # one domain and no metrics.csv: every pack is that domain's, whatever its id
    _write_run(tmp_path / "s", "bm25", {"alpha": {"index_seconds": 0.2}}, packs)
    assert cost_table([tmp_path / "s"]).retrieve_p50_ms.tolist() == [4.0]


def _overrides(s, tmp_path, peer="nano_graphrag"):
    from fanin.core.config import resolve_path
    return [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'out'}", "progress=false",
            "experiment_name=test", f"system={peer}", "llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}",
            f"paths.llm_cache={tmp_path / 'llm.sqlite'}", f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1"]


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_a_peer_run_folder_reports_its_package_and_index_cost(tmp_path):
    from fanin.doors.cli import main
    built_env("nano_graphrag")
    with StandIn(model="standin-costs", reply=nano_reply) as s:
        try: main(["run", "--stages", "index,retrieve,evaluate"] + _overrides(s, tmp_path))
        except SystemExit as e: assert e.code in (0, None)
        n_chats = len(s.chats())
    (man,) = (tmp_path / "out").rglob("manifest.json")
    t = cost_table([man.parent])
    assert len(t) == 1
    r = t.iloc[0]
    lk = read_lock("nano_graphrag")
    assert (r.system, r.domain, r.package, r.package_version) == ("nano_graphrag", "nature", lk.package, lk.version)
    assert r.llm_index_requests > 0 and 0 < r.llm_index_calls <= n_chats and r.llm_index_prompt_tokens > 0
    assert r.llm_index_completion_tokens > 0 and r.index_seconds > 0 and r.index_bytes > 0 and r.units > 0
    assert r.env_setup_seconds >= 0 and r.peer_index_seconds > 0 and r.retrieve_p50_ms > 0


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_bench_peer_lines_and_an_unbuildable_environment(tmp_path, monkeypatch):
    """`bench_peers`: a peer whose environment cannot be built (a lock pinning a package no index has) gives one error line naming
    pip's reason, and the next peer still runs and gives a well-formed line. The real nano-graphrag environment and tiktoken files
    are reused through links; the failed environment is built under tmp_path."""
    from fanin.doors.bench import bench_peers
    from fanin.systems.peers import default_envs, tiktoken_cache
    env = built_env("nano_graphrag")
    tiktoken_cache(default_envs().parent / "tiktoken", env.python)   # the folder linked below exists also when this test runs alone
    root = tmp_path / "root"
    shutil.copytree(ROOT / "peers" / "nano_graphrag", root / "peers" / "nano_graphrag")
    shutil.copy(ROOT / "peers" / "protocol.py", root / "peers" / "protocol.py")  # every adapter imports it
    (root / "peers" / "mem0").mkdir(parents=True)
    (root / "peers" / "mem0" / "requirements.lock").write_text(
        f"# peer: fanin-no-such-peer==0.0.0\n# python: {sys.version_info[0]}.{sys.version_info[1]}\nfanin-no-such-peer==0.0.0\n")
    envs = tmp_path / "peers" / "envs"
    envs.mkdir(parents=True)
    (envs / env.folder.name).symlink_to(env.folder, target_is_directory=True)
    (tmp_path / "peers" / "tiktoken").symlink_to(default_envs().parent / "tiktoken", target_is_directory=True)
    monkeypatch.setenv("FANIN_PEER_ENVS", str(envs))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with StandIn(model="standin-bench", reply=nano_reply) as s:
        ov = [o for o in _overrides(s, tmp_path) if not o.startswith("system=")] + [f"++system.root={root}"]
        bad, good = bench_peers(("mem0", "nano_graphrag"), "nature", ov)
    assert "\n" not in bad and re.fullmatch(r"bench peer=mem0 error=PeerEnvError: peer 'mem0': .+", bad), bad
    assert "No matching distribution" in bad or "fanin-no-such-peer" in bad
    m = re.fullmatch(r"bench peer=nano_graphrag domain=nature env_setup_s=(\S+) first_time=(yes|no) index_s=(\S+) model_s=(\S+) llm_calls=(\d+) "
                     r"prompt_tokens=(\d+) completion_tokens=(\d+) p50_ms=(\S+) llm_requests=(\d+) queries=(\d+) units=(\d+) "
                     r"package=nano-graphrag==0\.0\.8\.2", good)
    assert m, good
    assert m.group(2) == "no" and float(m.group(3)) > 0 and int(m.group(5)) > 0 and int(m.group(6)) > 0
    assert int(m.group(9)) >= int(m.group(5)) and int(m.group(10)) > 0 and float(m.group(8)) > 0
    assert 0 < float(m.group(4)) <= float(m.group(3))   # the stand-in's model time, within the build's wall time
