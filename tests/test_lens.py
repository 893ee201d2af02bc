"""The AuthTrace lens end to end on the AuthTrace-format fixture as the registered table `authtrace_lens`: real pipeline,
embedded reader, quote-level judge; tables under outputs/tables, figures under outputs/figures, byte-identical when rerun."""
from pathlib import Path

import pandas as pd

from fanin.doors.cli import main
from fanin.results.experiments import run_table
from fanin.results.lab_report import read_table


def test_lens_on_fixture_is_complete_and_byte_identical(tmp_path):
    ov = ["experiment=authtrace_fixture", f"paths.outputs={tmp_path / 'out'}", "progress=false", "systems=[bm25,oracle,closed_book]",
          "reader.max_tokens=48", "llm.server.n_ctx=2048"]
    params = dict(evidence_judge="quote", answer_judge="proxy", n_boot=300, seed=0)
    paths = run_table("authtrace_lens", ov, params={**params, "run_stages": ["index", "retrieve", "evaluate", "evidence", "answer", "judge"]})
    assert paths[""] == tmp_path / "out" / "tables" / "authtrace_lens.csv"
    t1 = read_table(paths[""]).set_index("system")
    assert t1.loc["oracle", "er_all"] == 1.0 and t1.loc["oracle", "ep_all"] == 1.0
    assert t1.loc["closed_book", "er_all"] == 0.0 and pd.isna(t1.loc["closed_book", "ep_all"])
    assert {"n_single", "n_low", "n_high"} <= set(t1.columns) and t1.loc["bm25", "n_high"] == 1
    assert {"correlations", "degradation_ac", "paired_bootstrap_er", "failure_attribution"} <= set(paths)
    figs = {k: p for k, p in paths.items() if k.startswith("fig:")}
    assert set(figs) == {"fig:degradation", "fig:er_ep_vs_ac", "fig:ac_by_fan_in"} and all(Path(p).stat().st_size > 0 for p in figs.values())
    assert figs["fig:degradation"] == tmp_path / "out" / "figures" / "authtrace_lens_degradation.png"
    first = {k: Path(p).read_bytes() for k, p in paths.items() if not k.startswith("fig:")}
    assert "evidence judge=quote" in first[""].decode().splitlines()[0]
    # the verb makes the same files from the finished runs (run_stages=[] by default: the folders as they are)
    main(["table", "authtrace_lens", *ov])   # the config's params: the document-level judge (the fixture's runs have both)
    doc = read_table(paths[""])
    assert "evidence judge=document" in paths[""].read_text().splitlines()[0] and len(doc) == 3
    again = run_table("authtrace_lens", ov, params=params)   # the runs as they are: nothing recomputed, same bytes
    assert {k: Path(p).read_bytes() for k, p in again.items() if not k.startswith("fig:")} == first
