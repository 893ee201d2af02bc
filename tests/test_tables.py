"""Experiment tables: one registry (configs/table/*.yaml, each a Hydra `_target_` driver) and one verb.
`fanin table --list` prints one name per line; `fanin table NAME [overrides]` writes outputs/tables/NAME.csv (and its parts) under
a setting line; an unknown name is refused with the registered names. The costs driver runs on a real BM25 run of the fixture."""

import pytest
import yaml

from fanin.doors.cli import main
from fanin.core.config import repo_root
from fanin.results.experiments import Table, run_table, table_names
from fanin.results.lab_report import read_table

FIXTURE = repo_root() / "tests" / "fixtures" / "wildgraphbench_tiny"


def test_list_prints_every_registered_table(capsys):
    main(["table", "--list"])
    names = capsys.readouterr().out.split()
    assert names == table_names() and names == sorted(p.stem for p in (repo_root() / "configs" / "table").glob("*.yaml"))
    assert {"graal_table1", "graphs_costs", "structured_costs", "peers_costs", "routing", "paradigms"} <= set(names)


def test_every_registered_driver_is_importable_and_returns_a_table():
    import inspect
    from hydra.utils import get_method
    from fanin.results.experiments import table_config
    for n in table_names():
        tc = table_config(n)
        f = get_method(tc._target_)
        assert inspect.signature(f).return_annotation in (Table, "Table"), f"{n}: {tc._target_} must return a Table"
        assert tc.get("experiment") is None or (repo_root() / "configs" / "experiment" / f"{tc.experiment}.yaml").exists(), n


def test_an_unknown_table_is_refused_with_the_names(capsys):
    with pytest.raises(SystemExit) as e: main(["table", "no_such_table"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no table named 'no_such_table'" in err and "graal_table1" in err


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_costs_table_on_a_real_bm25_run(tmp_path, capsys):
    ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path}", "progress=false", "systems=[bm25]",
          "experiment_name=tt"]
    with pytest.raises(SystemExit) as e: main(["table", "peers_costs", *ov])   # no finished run yet: refused, naming the command
    assert e.value.code == 2 and "fanin run" in capsys.readouterr().err
    main(["run", "--stages", "index,retrieve,evaluate", "experiment=peers", *ov])
    paths = run_table("peers_costs", ov)
    assert paths[""] == tmp_path / "tables" / "peers_costs.csv"
    first = paths[""].read_text().splitlines()[0]
    assert first.startswith("# setting: costs: data=wildgraphbench") and "bm25@" in first
    t = read_table(paths[""])
    assert t.system.tolist() == ["bm25"] and t.domain.tolist() == ["nature"] and t.retrieve_p50_ms.iloc[0] > 0
    assert t.llm_index_requests.iloc[0] == 0 and t.package.isna().all()


def test_adding_a_table_is_a_driver_and_a_config(tmp_path, monkeypatch):
    "A new table: a driver function anywhere importable and one YAML file; nothing else changes."
    import sys
    (tmp_path / "mytables.py").write_text(
        "import pandas as pd\nfrom fanin.results.experiments import Table\n"
        "def hello(overrides) -> Table:\n    return Table(pd.DataFrame({'k': [len(overrides)]}), 'hello: ' + ' '.join(overrides), "
        "{'twice': pd.DataFrame({'k': [2]})})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    home = tmp_path / "home"
    (home / "configs").mkdir(parents=True)
    for p in (repo_root() / "configs").iterdir():
        (home / "configs" / p.name).symlink_to(p)
    (home / "configs" / "table").unlink()
    (home / "configs" / "table").mkdir()
    (home / "configs" / "table" / "hello.yaml").write_text(yaml.safe_dump({"_target_": "mytables.hello"}))
    monkeypatch.setenv("FANIN_HOME", str(home))
    assert table_names() == ["hello"]
    paths = run_table("hello", [f"paths.outputs={tmp_path / 'out'}"])
    assert read_table(paths[""]).k.tolist() == [1] and read_table(paths["twice"]).k.tolist() == [2]
    assert paths[""].read_text().startswith(f"# setting: hello: paths.outputs={tmp_path / 'out'}")
    sys.modules.pop("mytables", None)


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_embedding_cache_table_shows_a_window_embedded_once(tmp_path):
    "dense embeds the fixture's windows; hybrid, built next over the same chunks, embeds none of them again."
    from fanin.core.config import resolve_path
    ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path}", "progress=false", "systems=[dense,hybrid]",
          "experiment_name=ec", f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1"]
    main(["run", "--stages", "index,retrieve,evaluate", "experiment=paper", *ov])
    t = read_table(run_table("embedding_cache", ov)[""]).set_index("system")
    assert t.loc["dense", "misses"] > 0 and t.loc["dense", "hits"] == 0 and t.loc["dense", "hit_rate"] == 0
    assert t.loc["hybrid", "misses"] == 0 and t.loc["hybrid", "hits"] == t.loc["dense", "misses"] and t.loc["hybrid", "hit_rate"] == 1


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_the_sweep_writes_its_registered_table_and_figure(tmp_path):
    "`fanin sweep` runs the notebook per (system, k) through papermill, then makes the registered table `topk` and its figure."
    from fanin.doors.cli import cmd_sweep
    ov = [f"dataset.root={FIXTURE}", "sweep.domain=nature", "sweep.systems=[bm25]", "sweep.ks=[2,3]", f"paths.outputs={tmp_path}"]
    cmd_sweep(ov)
    t = read_table(tmp_path / "tables" / "topk.csv")
    assert t.k.tolist() == [2, 3] and (t.system == "bm25").all() and (t.questions > 0).all()
    assert (tmp_path / "tables" / "topk.csv").read_text().startswith("# setting: top-k sweep: data=wildgraphbench")
    assert (tmp_path / "figures" / "topk_er_ep.png").stat().st_size > 0


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_reader_judge_ablation_is_a_registered_table(tmp_path):
    "The ablation's driver on the fixture: one stand-in reader, two deterministic judges; the tables and their parts are written."
    from openai_standin import StandIn
    with StandIn(model="reader", reply=lambda body: "The 2012 typhoon season had 25 named storms.") as r:
        ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path}", "systems=[bm25]",
              f"paths.llm_cache={tmp_path / 'llm.sqlite'}", "answer.per_domain_type=null", "answer.check_judges=false",
              "reader_llm=vllm", f"reader_llm.base_url={r.base_url}", f"reader_llm.model={r.model}", "reader_llm.context_tokens=4000"]
        paths = run_table("reader_judge_ablation", ov, params={"judges": [["proxy", []], ["keyfact", []]], "n_boot": 50})
    assert set(paths) == {"", "accuracy_by_bin", "judge_agreement", "er_accuracy_r", "per_question"}
    main_t = read_table(paths[""])
    assert set(main_t.judge) == {"proxy", "keyfact"} and (main_t.system == "bm25").all()
    assert paths[""].name == "reader_judge_ablation.csv" and "x proxy@" in paths[""].read_text().splitlines()[0]
