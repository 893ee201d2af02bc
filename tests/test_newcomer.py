"""What a newcomer trips on: `fanin run` ends on its headline numbers (ER / EP by fan-in bin), and running one system after
another on the same domain writes each its own tables instead of overwriting the first."""
import pytest

from fanin.doors.cli import main


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_run_prints_headline_and_never_overwrites_another_systems_table(tiny_overrides, capsys):
    out = [o for o in tiny_overrides if o.startswith("paths.outputs=")][0].split("=", 1)[1]
    main(["run", *tiny_overrides, "system=bm25"])
    said = capsys.readouterr().out
    assert "ER / EP by fan-in bin" in said and "bm25" in said and "single:" in said
    main(["run", *tiny_overrides, "system=long_context"])
    from pathlib import Path
    tables = sorted(p.name for p in (Path(out) / "tables").glob("*_by_fan_in_bin.csv"))
    assert tables == ["test-nature-bm25_by_fan_in_bin.csv", "test-nature-long_context_by_fan_in_bin.csv"], tables


def test_papermill_reads_every_paper_notebooks_parameters(caplog):
    "papermill parses each paper notebook's parameters cell (no 'Unable to parse', no 'unknown parameter: overrides')."
    import logging
    from pathlib import Path
    import papermill as pm
    nbs = Path(__file__).resolve().parents[1] / "nbs"
    with caplog.at_level(logging.WARNING, logger="papermill"):
        for name in ("91_reproduce_wildgraphbench_retrieval", "92_authtrace_lens", "94_reader_judge_ablation", "95_peers_vs_lab"):
            assert "overrides" in pm.inspect_notebook(str(nbs / f"{name}.ipynb")), name
    assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()]
