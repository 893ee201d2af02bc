"""Declared contracts: every configured system, answer judge and evidence judge subclasses its contract (System,
Judge, EvidenceJudge), and a config pointing at anything else stops with the contract's name; every dataset loader keeps the
Dataset contract, so `fanin stats` works on each of the three formats from the contract alone."""
import importlib
import inspect

import pytest
import yaml
from omegaconf import OmegaConf

from fanin.core.config import DECLARED_KEYS, ConfigError, compose, repo_root
from fanin.judging.evidence import EvidenceJudge
from fanin.judging.judges import Judge
from fanin.run.components import load_dataset, make_evidence_judge, make_judge
from fanin.core.schema import Dataset, dataset_gaps, stats_table
from fanin.systems.flat import System

ROOT = repo_root()


@pytest.mark.parametrize("group,base", [("system", System), ("judge", Judge), ("evidence_judge", EvidenceJudge)])
def test_every_config_builds_its_contract(group, base):
    for f in sorted((ROOT / "configs" / group).glob("*.yaml")):
        t = yaml.safe_load(f.read_text()).get("_target_")
        if t is None: continue   # a variant of another config (its defaults name the target)
        mod, name = t.rsplit(".", 1)
        obj = getattr(importlib.import_module(mod), name)
        if inspect.isclass(obj): assert issubclass(obj, base), f"{f.name}: {t} is not a {base.__name__}"
        else: raise AssertionError(f"{f.name}: {t} is a function, not a {base.__name__}")
        # one constructor contract: every YAML key, `name` included, is a keyword of __init__
        params = inspect.signature(obj.__init__).parameters
        keys = {k for k in yaml.safe_load(f.read_text()) if not k.startswith("_") and k not in ("defaults", *DECLARED_KEYS)}
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        assert "name" in params and (takes_any or keys <= set(params)), f"{f.name}: {t}.__init__ lacks {sorted(keys - set(params))}"


def test_the_base_classes_take_a_name():
    "A judge or system that only sets class attributes still accepts the `name` its YAML passes."
    class Bare(Judge): kind = "proxy"
    class BareEvidence(EvidenceJudge): pass
    class BareSystem(System): pass
    assert Bare(name="mine").name == "mine" and BareEvidence(name="ev").name == "ev" and BareSystem(name="s").name == "s"


def test_a_config_pointing_at_the_wrong_kind_of_object_is_refused():
    with pytest.raises(ConfigError, match=r"builds a ProxyJudge, not a fanin\.judging\.evidence\.EvidenceJudge"):
        make_evidence_judge(OmegaConf.create({"_target_": "fanin.judging.proxy_judges.ProxyJudge"}))
    with pytest.raises(ConfigError, match=r"not a fanin\.judging\.judges\.Judge"):
        make_judge(OmegaConf.create({"_target_": "fanin.judging.evidence.DocumentEvidenceJudge"}))


def test_judges_declare_their_kind():
    assert make_evidence_judge(OmegaConf.create({"_target_": "fanin.judging.evidence.DocumentEvidenceJudge"})).kind == "deterministic"
    assert make_evidence_judge(OmegaConf.create({"_target_": "fanin.judging.evidence.LLMEvidenceJudge"})).kind == "llm"
    assert System.needs_llm is False


@pytest.mark.filterwarnings("ignore:WildGraphBench")
@pytest.mark.parametrize("overrides,qtypes", [
    ([f"dataset.root={ROOT / 'tests/fixtures/wildgraphbench_tiny'}", "dataset.domains=[nature]"], ["single-fact", "multi-fact", "summary"]),
    (["dataset=graphrag_bench", f"dataset.root={ROOT / 'tests/fixtures/graphrag_bench_tiny'}"], ["FB", "MC", "MS", "TF", "OE"]),
    (["dataset=authtrace_tiny"], ["single-doc", "multi-doc"]),
    (["dataset=beir", f"dataset.root={ROOT / 'tests/fixtures/beir_tiny'}"], ["query"]),
    (["dataset=hipporag", f"dataset.root={ROOT / 'tests/fixtures/hipporag_tiny'}"], None),
])
def test_every_dataset_keeps_the_contract_and_gets_stats(overrides, qtypes):
    ds = load_dataset(compose(overrides))
    from fanin.core.schema import Snapshot
    assert dataset_gaps(ds) == [] and isinstance(ds, Dataset) and Snapshot.model_validate(ds.snapshot())
    qtypes = qtypes or list(ds.qtypes)
    assert list(ds.qtypes) == qtypes and set(ds.domains) <= set(ds.all_domains)
    assert {i.qtype for i in ds.instances()} <= set(qtypes), "every question's type is one the dataset declares"
    st = stats_table(ds)
    a = st[(st.domain == "all") & (st.qtype == "all")].iloc[0]
    assert a.questions == len(ds.instances()) and a.questions == st[(st.domain == "all") & (st.qtype != "all")].questions.sum()


def test_a_dataset_whose_snapshot_lacks_a_field_stops_at_load_naming_it(tmp_path):
    """A new dataset whose `snapshot()` leaves out `commit` used to fail later in a setting card with `KeyError: 'commit'`; the
    contract (`fanin.core.schema.Snapshot`) names the field when the dataset is loaded."""
    import sys
    (tmp_path / "my_data.py").write_text(
        "from fanin.core.schema import Corpus\n"
        "class Mine:\n"
        "    name, domains, all_domains, qtypes, broad_qtypes = 'mine', ['d'], ['d'], ['q'], frozenset()\n"
        "    def __init__(self, **kw): pass\n"
        "    def corpus(self, domain): return Corpus('mine/d', [])\n"
        "    def instances(self, domain=None): return []\n"
        "    def snapshot(self): return {'dataset': 'mine', 'qa_sha1': 'x', 'domains': ['d'], 'clean': False}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ConfigError, match=r"my_data.Mine: its snapshot\(\) field commit: field required"):
            load_dataset(OmegaConf.create({"dataset": {"_target_": "my_data.Mine"}}))
    finally: sys.path.remove(str(tmp_path))
