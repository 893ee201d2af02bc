"""The README is a user's guide that says what exists: its configuration registry names every config of every group, its
commands use the tools `make setup` installs (.venv/bin/...), it stays short and free of development history, and every
measured figure it quotes links to a file in data/measured/ (or the notebook that renders them) that exists."""
import csv
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _section(heading: str) -> str:
    "The text under a `## heading` (or `### heading`) up to the next heading of any level."
    m = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", README, re.M | re.S)
    assert m, f"README has no section {heading!r}"
    return m.group(1)


def test_the_registry_table_names_every_config():
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| (.+) \|$", _section("Configuration registry"), re.M)}
    missing = []
    for group in ("dataset", "system", "embedder", "llm", "reader", "judge", "evidence_judge", "experiment", "table"):
        assert group in rows, f"README's registry has no row for {group}"
        missing += [f"{group}={p.stem}" for p in sorted((ROOT / "configs" / group).glob("*.yaml")) if f"`{p.stem}`" not in rows[group]]
    assert not missing, f"README's configuration registry omits {missing}: run `make export`"


def test_the_generated_blocks_are_current():
    "The registry and the module map are rendered from configs/ and the declared layers (`make export`), never kept by hand."
    from fanin.doors.readme import render_readme
    assert render_readme(README, ROOT) == README, "README.md's generated blocks are behind configs/ or the layers: run `make export`"


def test_readme_commands_use_the_venv_tools():
    blocks = "\n".join(re.findall(r"```(?:bash|sh)?\n(.*?)```", README, re.S))
    bare = [l for l in blocks.splitlines() if re.match(r"\s*(papermill|fanin|fanin-hydra|dvc|pytest|jupyter|nbdev-\w+)\s", l)]
    assert not bare, f"README commands that are not on PATH after `make setup` (use .venv/bin/...): {bare}"


def test_readme_is_a_short_guide():
    n = len(README.splitlines())
    assert n <= 280, f"README.md has {n} lines; it is a user's guide of at most ~280: measured write-ups go to data/measured/ and nbs/97_measured.ipynb"
    for heading in ("The two commands", "What a researcher does", "Reproduce a paper's table", "Add a system", "Sweep k",
                    "Bring an endpoint", "Read a result", "Opt-in targets", "Configuration registry", "Data sources and licences",
                    "Measured", "Working on it"):
        assert re.search(rf"^#+ {re.escape(heading)}", README, re.M), f"README has no section starting {heading!r}"


# development history belongs to git log: session and issue numbers, tracker references, and "was X, now Y" accounts
NARRATIVE = [r"\bsessions? \d+", r"\bissues? #?\d+", r"(?<![\w&])#\d{2,}\b", r"\bwas [^.;|]{1,60}, now\b", r"\bnow [^.;|]{1,80}\(was\b", r"\(was \d", r", was \d",
             r"\b(previously|used to be|no longer|this session|last session|in this PR|changelog)\b"]


def test_readme_has_no_development_narrative():
    found = [(p, m.group(0)) for p in NARRATIVE for m in re.finditer(p, README, re.I)]
    assert not found, f"development history in README.md (git log keeps it): {found}"


def test_the_reproduce_measured_block_is_marked_once():
    opens, closes = README.count("<!-- reproduce-measured -->"), README.count("<!-- /reproduce-measured -->")
    assert opens == closes == 1, f"README needs exactly one <!-- reproduce-measured --> ... <!-- /reproduce-measured --> block ({opens}, {closes})"
    assert README.index("<!-- reproduce-measured -->") < README.index("<!-- /reproduce-measured -->")


def test_every_measured_link_exists():
    paths = set(re.findall(r"\b(data/measured/[\w./-]*\w)", README)) | set(re.findall(r"\]\(((?:data|nbs)/[^)\s]+)\)", README))
    assert paths, "README's Measured section links to no data file"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"README links to files that do not exist: {missing}"
    measured = re.sub(r"<!-- (scale|judges) -->.*?<!-- /(scale|judges) -->", "", _section("Measured"), flags=re.S)  # bound below
    rows = [l for l in measured.splitlines() if l.startswith("| ") and not l.startswith("| figure")]
    assert len(rows) >= 5, "the Measured table has a line per headline figure"
    unlinked = [l for l in rows if not re.search(r"\]\((data/measured/|nbs/97_measured)", l)]
    assert not unlinked, f"Measured lines without a link to their data: {unlinked}"
    undated = [l for l in rows if not re.search(r"\| (20\d\d-\d\d-\d\d|not stated)", l)]
    assert not undated, f"Measured lines without a date (or 'not stated'): {undated}"
    with open(ROOT / "data" / "measured" / "figures.csv", newline="") as f:
        tables = {r["table"] for r in csv.DictReader(f)}
    cited = set(re.findall(r"figures\.csv\]\([^)]*\) `(\w+)`", measured))
    assert cited and cited <= tables, f"Measured lines cite tables that data/measured/figures.csv lacks: {sorted(cited - tables)}"


def test_the_scale_table_is_the_kept_record():
    """The README's scale table is `fanin.doors.scale_report.scale_summary` of data/measured/scale.json, so it cannot keep figures the record
    no longer holds; regenerate it with
    .venv/bin/python -c "import json; from fanin.doors.scale_report import scale_summary; print(scale_summary(json.load(open('data/measured/scale.json'))))"."""
    import json
    from fanin.doors.scale_report import scale_summary
    m = re.search(r"<!-- scale -->\n(.*?)\n<!-- /scale -->", README, re.S)
    assert m, "README has no <!-- scale --> ... <!-- /scale --> block"
    want = scale_summary(json.loads((ROOT / "data" / "measured" / "scale.json").read_text()))
    assert m.group(1).strip() == want.strip(), "README's scale table differs from data/measured/scale.json (see this test's docstring)"
    assert "data/measured/scale.png" in README, "README should show the scale figure"


def test_the_fault_run_line_is_the_kept_record():
    "The Measured table's fault-run line gives data/measured/faults.json's counts, date and machine, and nothing else."
    import json
    rec = json.loads((ROOT / "data" / "measured" / "faults.json").read_text())
    (line,) = [l for l in _section("Measured").splitlines() if l.startswith("| the fault run |")]
    c = rec["counts"]
    bad = sum(v for k, v in c.items() if k not in ("stopped (clear)", "survived"))
    want = (f"| the fault run | {rec['faults']} kinds of fault: {c.get('stopped (clear)', 0)} clear stops, {c.get('survived', 0)} correct "
            f"results, {bad} tracebacks, hangs, silent wrong results, leaks or data lost | {rec['date']} | {rec['machine']} |")
    assert line.startswith(want), f"README's fault-run line differs from faults.json:\n  {line}\nexpected it to start\n  {want}"


def test_the_diagnosis_lines_are_the_kept_record():
    """The README's diagnosis lines are `fanin.results.diagnosis.diagnosis_summary` of data/measured/diagnosis.json, and its plain-words
    reading holds on that record: flat retrieval loses most of what it misses to ranking, dense never to reach, hybrid partly to its
    fusion's candidate cut, the entity graphs mostly to reach. Regenerate with
    .venv/bin/python -c "import json; from fanin.results.diagnosis import diagnosis_summary as s; print(s(json.load(open('data/measured/diagnosis.json')), ['hipporag', 'paper'], cold=COLD))" with COLD the cold make reproduce's
    total from data/measured/figures.csv (`reproduce_cold_exact`)."""
    import json
    import pandas as pd
    from fanin.results.diagnosis import diagnosis_summary
    rec = json.loads((ROOT / "data" / "measured" / "diagnosis.json").read_text())
    m = re.search(r"<!-- diagnosis -->\n(.*?)\n<!-- /diagnosis -->", README, re.S)
    assert m, "README has no <!-- diagnosis --> ... <!-- /diagnosis --> block"
    with open(ROOT / "data" / "measured" / "figures.csv", newline="") as f:
        (cold,) = [r for r in csv.DictReader(f) if r["table"] == "reproduce_cold_exact" and r["row"] == "total" and r["figure"] == "seconds"]
    cold = {"seconds": float(cold["value"]), "date": cold["date"], "machine": cold["machine"]}
    want = diagnosis_summary(rec, ["hipporag", "paper"], cold=cold)
    assert m.group(1).strip() == want.strip(), "README's diagnosis lines differ from the record (see the docstring)"
    total = sum(e["seconds"] for e in rec["experiments"].values())
    assert total <= 0.2 * cold["seconds"], f"the diagnoses take {total:.0f} s, over 20% of the cold make reproduce ({cold['seconds']:.0f} s)"
    assert "data/measured/diagnosis_hipporag_loss.png" in README
    t = pd.DataFrame(rec["experiments"]["hipporag"]["loss"])
    high = t[t.fan_in_bin == "high"].pivot(index="system", columns="step", values="share")
    assert (high.unknown == 0).all(), "the lab's own systems leave nothing unknown"
    assert high.loc["bm25", "ranked_out"] > high.loc["bm25", "unreachable"] and high.loc["dense", "unreachable"] == 0
    assert high.loc["hybrid", "unreachable"] > 0 and high.loc["hybrid", "ranked_out"] < high.loc["dense", "ranked_out"]
    for g in ("graal", "graph_retrieve", "entity_mention"):
        assert high.loc[g, "unreachable"] > high.loc[g, "ranked_out"], g


def test_the_hipporag_line_is_the_kept_record():
    """The README's HippoRAG line is rendered from data/measured/hipporag_recall.json (`fanin table hipporag_recall --record
    data/measured`, which tests/test_hipporag_format.py holds against a fresh run) beside the papers' BM25 (data/reported): both
    tokenizations of the lab's BM25, the corpus the samples search and the papers' corpus, the record's date and machine."""
    import json
    from fanin.results.lab_report import recall_summary
    from fanin.results.paper_comparisons import load_reported
    rec = json.loads((ROOT / "data" / "measured" / "hipporag_recall.json").read_text())
    rep = load_reported()
    paper = rep[(rep.paper == "hipporag") & (rep.table == "table2") & (rep.method == "BM25") & (rep.setting == "dataset=musique")]
    r2, r5 = (float(paper[paper.metric == m].value.iloc[0]) for m in ("recall_at_2", "recall_at_5"))
    (passages,) = {r["passages"] for r in rec["rows"] if r["domain"] == "musique_train"}
    papers = re.search(r"MuSiQue ([\d,]+) passages", (ROOT / "configs" / "reproduction" / "hipporag_table2_recall.yaml").read_text()).group(1)
    want = (f"| HippoRAG layout, MuSiQue R@2 / R@5 | {recall_summary(rec, 'musique_train', ['bm25', 'bm25_words', 'dense', 'hybrid'])}; "
            f"the papers' BM25 {r2:.1f} / {r5:.1f} over {papers} passages, these samples {passages:,} (not comparable) | {rec['date']} | "
            f"{rec['machine']} | [hipporag_recall.json](data/measured/hipporag_recall.json) |")
    line = next((l for l in README.splitlines() if l.startswith("| HippoRAG layout, MuSiQue")), "")
    assert line == want, f"README's HippoRAG line differs from the record:\n  {line}\nexpected\n  {want}"


def test_the_router_line_is_the_kept_record():
    """The README's sentence on the router's share of the per-question ceiling is rendered from the `structured` experiment of
    data/measured/diagnosis.json (its headroom table over every fan-in bin)."""
    import json
    rec = json.loads((ROOT / "data" / "measured" / "diagnosis.json").read_text())
    h = {r["system"]: r for r in rec["experiments"]["structured"]["headroom"] if r["fan_in_bin"] == "all"}
    r = h["router"]
    want = (f"On mathematics ({r['questions']} questions, `make structured`) the lab's router reaches {100 * r['of_ceiling']:.0f}% of "
            f"that ceiling (ER {r['er']:.3f} against the oracle route's {r['oracle_route']:.3f}; the best single system, "
            f"{r['best_single']}, {r['best_single_er']:.3f}).")
    assert want in " ".join(README.split()), f"README should say: {want}"


def test_the_judges_table_is_the_kept_record():
    """The README's judges table is `fanin.results.lab_report.judges_summary` of data/measured/judges.json (`fanin judge-check
    judge=NAME --record data/measured`; tests/test_judges_agreement.py reruns the offline judges against it)."""
    import json
    from fanin.results.lab_report import judges_summary
    rec = json.loads((ROOT / "data" / "measured" / "judges.json").read_text())
    m = re.search(r"<!-- judges -->\n(.*?)\n<!-- /judges -->", README, re.S)
    assert m, "README has no <!-- judges --> ... <!-- /judges --> block"
    sets = {"tuning": "cases.jsonl", **{f"frozen{i}": f"frozen{i}_cases.jsonl" for i in ["", "2", "3", "4", "5", "6"]}}
    judges = [l.split("`")[1] for l in m.group(1).splitlines()[2:]]
    assert {"proxy", "keyfact", "semfact"} <= set(judges), judges
    assert m.group(1).strip() == judges_summary(rec, judges, sets), "README's judges table differs from the record (rerun the block)"


def test_the_engine_row_is_the_kept_record():
    """The README's row for the sharded dense build is `fanin.doors.engine_bench.engine_row` of data/measured/engine.json
    (`make bench-engine`), so its seconds, ratio and sameness cannot outlive the record."""
    import json
    from fanin.doors.engine_bench import engine_row
    doc = json.loads((ROOT / "data" / "measured" / "engine.json").read_text())
    assert engine_row(doc) in README.splitlines(), "README's engine row differs from data/measured/engine.json (rerun its row)"
    assert doc["same_index"] and doc["same_packs"] == doc["questions"], "the sharded build is not the single-process build"


def _peer_builds(rows) -> tuple[int, int]:
    "(peer packages whose index built in at least one mode, peer packages) on mathematics, from figures.csv `peers_mathematics`."
    t = [r for r in rows if r["table"] == "peers_mathematics"]
    package = {r["row"]: r["value"] for r in t if r["figure"] == "package" and r["value"] != "—"}
    built = {package[r["row"]] for r in t if r["figure"] == "ER all" and r["row"] in package and re.fullmatch(r"[\d.]+", r["value"])}
    return len(built), len(set(package.values()))


def test_every_figures_csv_line_of_the_readme_is_in_its_table():
    """Each line of the README's Measured table that cites `figures.csv` TABLE states only numbers that TABLE holds on the date
    the line gives (as written, or seconds given in minutes; the peers line counts the packages that build from the per-peer
    rows), so a figure re-measured into figures.csv cannot leave the README quoting an older one."""
    rows = list(csv.DictReader(open(ROOT / "data" / "measured" / "figures.csv", newline="", encoding="utf-8")))
    num = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
    bad = []
    for line in _section("Measured").splitlines():
        m = re.search(r"figures\.csv\]\([^)]*\) `(\w+)`", line)
        if not m or not line.startswith("| "): continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        value, date = cells[1], cells[2]
        held = [r for r in rows if r["table"] == m.group(1) and r["date"] == date]
        if m.group(1) == "peers_mathematics":
            built, packages = _peer_builds(rows)
            if not value.startswith(f"{built} of {packages} peer packages build"): bad.append(f"{cells[0]}: not '{built} of {packages}'")
            continue
        values = set()
        for r in held:
            for n in num.findall(r["value"]):
                x = float(n.replace(",", ""))
                values |= {round(x, 1)} | ({round(x / 60, 1)} if r["unit"] == "s" else set())
        missing = [n for n in num.findall(value) if round(float(n.replace(",", "")), 1) not in values]
        if not held or missing: bad.append(f"{cells[0]}: {missing or 'no row of that date'} not in figures.csv `{m.group(1)}` ({date})")
    assert not bad, "README lines quoting figures their table does not hold:\n" + "\n".join(bad)
