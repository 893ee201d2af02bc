"""A key written inside an endpoint URL (`http://user:KEY@host/v1`) reaches the endpoint and nothing else: no manifest, stamp,
LLM cache, ledger or log of the run holds it (a canary is searched for in every file the run wrote and in what it printed)."""
from pathlib import Path

from fanin.run.pipeline import run
from openai_standin import StandIn

CANARY = "sk-CANARY-in-url-7f3a9c"


def test_a_key_inside_the_base_url_never_lands_in_outputs(tiny_overrides, capsys):
    out = Path([o for o in tiny_overrides if o.startswith("paths.outputs=")][0].split("=", 1)[1])
    with StandIn(model="served-7b", max_model_len=4096, reply=lambda b: "Tower 1 was completed in 1911.") as s:
        url = s.base_url.replace("://", f"://lab:{CANARY}@")
        (folder,) = run(tiny_overrides + ["system=bm25", "answer.per_domain_type=1", "answer.check_judges=false",
                                          "answer.judges=[keyfact]", "reader_llm=vllm", f"reader_llm.base_url={url}",
                                          f"reader_llm.model={s.model}"],
                        stages=["index", "retrieve", "evaluate", "answer", "judge"])
        assert s.requests, "the endpoint was not called"
    leaked = [str(p) for p in out.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert not leaked, f"the key written in the URL landed in {leaked}"
    printed = capsys.readouterr()
    assert CANARY not in printed.out + printed.err
    assert "lab:" not in (folder / "manifest.json").read_text()
