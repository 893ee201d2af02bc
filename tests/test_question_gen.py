"""Questions from your own corpus through the CLI against a loopback stand-in: `fanin generate --plan` asks nothing and counts
the calls; `fanin generate` writes a WildGraphBench-layout dataset whose questions load with the fan-in they were built with and
run through `fanin run`; every candidate and the filter that dropped it is kept."""
import json
import re

import pandas as pd

from fanin.doors.cli import main
from fanin.core.config import repo_root
from openai_standin import StandIn

FIXTURE = repo_root() / "tests" / "fixtures" / "wildgraphbench_tiny"


def first_sentences(body):
    "The stand-in's replies: the first sentence of each page shown; the answerability check says 'not complete'."
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Page" not in user: return json.dumps({"ok": True})
    if "Reference answer:" in user: return json.dumps({"reason": "one part only", "complete": False})
    pages = re.split(r"Page \d+:\n", user)[1:] or [user.split("Page:\n", 1)[-1]]
    firsts = [re.split(r"(?<=[.!?])\s", p.split("\n", 1)[1].strip())[0] for p in pages]
    if '"quote"' in system: return json.dumps({"question": f"What happened? ({firsts[0][:40]})", "answer": firsts[0], "quote": firsts[0]})
    return json.dumps({"question": f"How do these relate: {' / '.join(f[:30] for f in firsts)}?", "answer": " ".join(firsts),
                       "statements": firsts, "quotes": firsts})


def test_generated_questions_load_with_their_fan_in_and_run(tmp_path, capsys):
    base = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}", "progress=false"]
    with StandIn(model="standin-gen", reply=first_sentences) as s:
        llm = ["llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}", "llm.price_in=1", "llm.price_out=2"]
        counts = ["generate.single=2", "generate.multi=1", "generate.summary=1"]
        main(["generate", *base, *llm, *counts, "--out", str(tmp_path / "gen"), "--plan"])
        assert "plan: 9 calls to standin-gen at most" in capsys.readouterr().out and len(s.chats()) == 0
        from fanin.run.plan import plan
        p = plan(base + llm + counts, ["generate"])   # the same count through `fanin plan --stages generate`
        row = p.rows.iloc[0]
        assert (len(p.rows), row.stage, row.requests) == (1, "generate", 9) and p.usd() > 0 and len(s.chats()) == 0
        main(["generate", *base, *llm, *counts, "--out", str(tmp_path / "gen")])
        assert f"dataset.root={tmp_path / 'gen'}" in capsys.readouterr().out
    cands = [json.loads(l) for l in (tmp_path / "gen" / "generation" / "nature.jsonl").read_text().splitlines()]
    assert [c["status"] for c in cands] == ["kept"] * 4 and "Generated questions" in (tmp_path / "gen" / "GENERATED.md").read_text()
    main(["run", f"dataset.root={tmp_path / 'gen'}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}",
          "progress=false", "experiment_name=gen", "system=bm25", "k=3", "k_summary=3"])
    (m,) = (tmp_path / "outputs" / "gen").glob("*/metrics.csv")
    assert sorted(pd.read_csv(m).fan_in) == [1, 1, 2, 3]
