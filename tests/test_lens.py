"The AuthTrace lens end to end on the AuthTrace-format fixture: real pipeline, embedded reader, quote-level judge."
from pathlib import Path

import pandas as pd

from fanin.analysis import authtrace_lens
from fanin.config import compose
from fanin.pipeline import run
from fanin.lab_report import answer_setting_line, read_table


def test_lens_on_fixture_is_complete_and_byte_identical(tmp_path):
    ov = ["experiment=authtrace_fixture", f"paths.outputs={tmp_path / 'out'}", "progress=false", "systems=[bm25,oracle,closed_book]",
          "reader.max_tokens=48", "llm.server.n_ctx=2048"]
    cfg = compose(ov)
    folders = run(ov)  # the experiment's stages: index .. evidence, answer, judge
    assert len(folders) == 3
    res = authtrace_lens(folders, cfg.fan_in_bins, tmp_path / "lens", answer_setting_line(folders), "quote", "proxy", 300, 0)
    t1 = read_table(res["tables"]["table1_by_bin"]).set_index("system")
    assert t1.loc["oracle", "er_all"] == 1.0 and t1.loc["oracle", "ep_all"] == 1.0
    assert t1.loc["closed_book", "er_all"] == 0.0 and pd.isna(t1.loc["closed_book", "ep_all"])
    assert {"n_single", "n_low", "n_high"} <= set(t1.columns) and t1.loc["bm25", "n_high"] == 1
    first = {k: Path(p).read_bytes() for k, p in res["tables"].items()}
    assert all(Path(f).exists() for f in res["figures"].values())
    assert "evidence judge=quote" in first["table1_by_bin"].decode().splitlines()[0]
    again = authtrace_lens(folders, cfg.fan_in_bins, tmp_path / "lens", answer_setting_line(folders), "quote", "proxy", 300, 0)
    assert {k: Path(p).read_bytes() for k, p in again["tables"].items()} == first
