"""Bad input cannot pass silently: the WildGraphBench loader checks every file when it loads (one DataError naming file, line,
field, value and fix), unresolvable references warn or fail by policy, and run parameters are checked before any work."""
import os
import shutil
import warnings

import pytest

from conftest import FIXTURE
from fanin.core.config import ConfigError, compose

TOPIC = "corpus/nature/Tiny typhoon season"
QA = "QA/nature/questions.jsonl"


@pytest.fixture()
def data(tmp_path):
    "A copy of the tiny WildGraphBench-shaped fixture (one domain, five pages, four questions) to damage."
    root = tmp_path / "wgb"
    shutil.copytree(FIXTURE, root)
    return root


def load(root, **kw):
    from fanin.data.wildgraphbench import WildGraphBench
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's one unresolvable reference warns; these tests are about errors
        return WildGraphBench(root, domains=["nature"], **kw)


def data_error(root, **kw):
    from fanin.core.schema import DataError
    with pytest.raises(DataError) as e:
        load(root, **kw)
    return e.value


def edit_line(path, n, old, new):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert old in lines[n - 1], (old, lines[n - 1])
    lines[n - 1] = lines[n - 1].replace(old, new)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---- the loader -----------------------------------------------------------------------------------------------------------
def test_empty_corpus_folder(data):
    for p in (data / TOPIC / "reference_pages").glob("*.txt"): p.unlink()
    e = data_error(data)
    assert len(e.problems) == 1
    msg = str(e)
    assert "reference_pages" in msg and "field 'reference_pages' = [] (list)" in msg and "at least one page file" in msg
    assert "dataset.domains" in msg  # the fix: restore the pages or leave the domain out


def test_ref_urls_as_a_string(data):
    edit_line(data / QA, 2, '["https://example.org/saola", "https://example.org/bolaven"]', '"https://example.org/saola"')
    e = data_error(data)
    msg = str(e)
    assert f"{data / QA}, line 2: field 'ref_urls' = 'https://example.org/saola' (str)" in msg
    assert 'write ["https://example.org/saola"]' in msg


def test_duplicated_question_names_both_lines(data):
    qa = data / QA
    lines = qa.read_text().splitlines()
    qa.write_text("\n".join(lines + [lines[0]]) + "\n")
    e = data_error(data)
    (p,) = e.problems
    assert (p.line, p.field) == (5, "question") and "line 1" in p.expected
    assert f"{qa}, line 5: field 'question' = 'Which signal did" in str(e) and "delete line 5 or line 1" in str(e)


def test_unresolvable_ref_warns_with_count_by_default(data):
    from fanin.core.schema import DataWarning
    from fanin.data.wildgraphbench import WildGraphBench
    edit_line(data / QA, 1, '"https://example.org/vicente"', '"https://example.org/vicente", "https://example.org/gone"')
    with pytest.warns(DataWarning) as w:
        b = WildGraphBench(data, domains=["nature"])
    assert len(w) == 1
    msg = str(w[0].message)
    assert "2 of 8 ref_urls resolve to no page" in msg and "2 question(s)" in msg
    assert "QA/nature/questions.jsonl:1 https://example.org/gone" in msg and "dataset.unresolved_refs=fail" in msg
    assert b.unresolved[["line", "position", "ref_url"]].values.tolist() == [
        [1, 1, "https://example.org/gone"], [4, 0, "https://example.org/not-in-references"]]
    assert [i.fan_in for i in b.instances()] == [1, 2, 3, 0]
    assert b.resolution_summary()["unresolved"] == 2


def test_unresolvable_ref_fails_under_fail_policy(data):
    e = data_error(data, unresolved_refs="fail")
    msg = str(e)
    assert f"{data / QA}, line 4: field 'ref_urls[0]' = 'https://example.org/not-in-references' (str)" in msg
    assert "not among the urls of references.jsonl" in msg


def test_unresolved_policy_from_the_config(data):
    from fanin.core.config import instantiate
    from fanin.core.schema import DataError
    with pytest.raises(DataError, match="not-in-references"):
        instantiate(compose([f"dataset.root={data}", "dataset.domains=[nature]", "dataset.unresolved_refs=fail"]).dataset)
    with pytest.raises(ConfigError, match="dataset.unresolved_refs='maybe': expected one of warn, fail"):
        load(data, unresolved_refs="maybe")


def test_non_utf8_bytes_in_questions(data):
    qa = data / QA
    raw = qa.read_bytes()
    lines = raw.split(b"\n")
    lines[2] = lines[2].replace(b"Summarise the damage", b"Summarise the d\xe9g\xe2ts")  # latin-1 bytes inside the question
    qa.write_bytes(b"\n".join(lines))
    offset = len(lines[0]) + len(lines[1]) + 2 + lines[2].index(b"\xe9")
    e = data_error(data)
    (p,) = e.problems
    assert (p.line, p.field) == (3, "question")
    assert f"{qa}, line 3: field 'question'" in str(e) and f"byte offset {offset} (line 3)" in str(e) and "b'\\xe9'" in str(e)


def test_cut_line_in_references(data):
    refs = data / TOPIC / "references.jsonl"
    lines = refs.read_text().splitlines()
    lines[2] = lines[2][:30]  # '{"title": "Bolaven damage in K'
    refs.write_text("\n".join(lines) + "\n")
    e = data_error(data)
    (p,) = e.problems
    assert (p.line, p.field) == (3, "<line>")
    assert f"{refs}, line 3: field '<line>' = '{lines[2]}' (str): expected one JSON object per line" in str(e)
    assert "cut or damaged" in str(e)


def test_file_cut_off_mid_record(data):
    refs = data / TOPIC / "references.jsonl"
    refs.write_bytes(refs.read_bytes()[:-25])  # the last record loses its end and its newline
    e = data_error(data)
    assert e.problems[0].line == 5 and "the file ends inside this record" in str(e)


def test_question_type_empty_list(data):
    edit_line(data / QA, 1, '"question_type": ["single-fact"]', '"question_type": []')
    e = data_error(data)
    assert f"{data / QA}, line 1: field 'question_type' = [] (list): expected a one-element list" in str(e)
    assert 'write one of ["single-fact"], ["multi-fact"] or ["summary"]' in str(e)


@pytest.mark.parametrize("old,new,field,shown", [
    ('"question": "Which signal', '"question": 7, "x": "Which signal', "question", "7 (int)"),
    ('"answer": "Hurricane Signal No. 10."', '"answer": ""', "answer", "'' (str)"),
    ('"answer": "Hurricane Signal No. 10.", ', '', "answer", "<missing>"),
    ('"ref_urls": ["https://example.org/vicente"]', '"ref_urls": []', "ref_urls", "[] (list)"),
    ('"ref_urls": ["https://example.org/vicente"]', '"ref_urls": [null]', "ref_urls[0]", "None (NoneType)"),
    ('"question_type": ["single-fact"]', '"question_type": "trivia"', "question_type", "'trivia' (str)"),
])
def test_wrong_types_and_empty_required_fields(data, old, new, field, shown):
    edit_line(data / QA, 1, old, new)
    e = data_error(data)
    p = e.problems[0]
    assert (p.line, p.field) == (1, field) and f"line 1: field '{field}' = {shown}: expected" in str(e)


def test_unknown_field_and_bad_reference(data):
    edit_line(data / QA, 4, '"answer"', '"answr"')
    edit_line(data / TOPIC / "references.jsonl", 2, '"url": "https://example.org/saola#top"', '"url": 12')
    e = data_error(data)
    assert [(p.line, p.field) for p in e.problems] == [(4, "answer"), (4, "answr"), (2, "url")]
    assert "field 'answr' = 'Unknown.' (str): expected only the fields question, question_type, ref_urls, answer, gold_statements" in str(e)
    assert "references.jsonl, line 2: field 'url' = 12 (int)" in str(e)


def test_non_utf8_page(data):
    page = data / TOPIC / "reference_pages" / "Bolaven damage in Korea.txt"
    page.write_bytes(page.read_bytes() + b"\nwon \x80 damage\n")
    e = data_error(data)
    assert "Bolaven damage in Korea.txt" in str(e) and "byte offset" in str(e) and "b'\\x80'" in str(e)


def test_all_problems_reported_together(data):
    edit_line(data / QA, 1, '"question_type": ["single-fact"]', '"question_type": []')
    edit_line(data / QA, 2, '["https://example.org/saola", "https://example.org/bolaven"]', '"https://example.org/saola"')
    refs = data / TOPIC / "references.jsonl"
    refs.write_text(refs.read_text().replace('"title": "Season summary 2012"', '"title": ""'))
    e = data_error(data)
    assert len(e.problems) == 3 and str(e).startswith("3 problems in the input data:")
    assert [(p.line, p.field) for p in e.problems] == [(1, "question_type"), (2, "ref_urls"), (4, "title")]


def test_empty_root_override_is_an_error():
    from fanin.core.config import instantiate
    with pytest.raises(ConfigError) as e:
        instantiate(compose(["dataset.root="]).dataset)
    assert "dataset.root is empty" in str(e.value) and "dataset.root=null" in str(e.value)


def test_real_data_loads_clean(real_data_root):
    from fanin.data.wildgraphbench import WildGraphBench
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DataWarning either
        b = WildGraphBench(real_data_root, domains=["mathematics", "history"])
    assert len(b.instances()) == 33 + 36 and len(b.unresolved) == 0


# ---- run parameters ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("override,message", [
    ("k=0", "k=0: expected a positive integer (k=5)"),
    ("k=-3", "k=-3: expected a positive integer (k=5)"),
    ("k=1.5", "k=1.5: expected a positive integer (k=2)"),
    ("k=abc", "k=abc: expected a positive integer (k=5)"),
    ("k=true", "k=true: expected a positive integer"),
    ("k_summary=0", "k_summary=0: expected a positive integer or null"),
    ("answer.per_domain_type=0", "answer.per_domain_type=0: expected a positive integer or null"),
    ("answer.per_domain_type=2.5", "answer.per_domain_type=2.5: expected a positive integer or null (answer.per_domain_type=3)"),
    ("answer.max_failed_share=1.5", "answer.max_failed_share=1.5: expected a number from 0 to 1"),
    ("answer.max_failed_share=-0.1", "answer.max_failed_share=-0.1: expected a number from 0 to 1"),
    ("llm.concurrency=0", "llm.concurrency=0: expected a positive integer (llm.concurrency=1)"),
    ("llm.concurrency=2.5", "llm.concurrency=2.5: expected a positive integer"),
    ("fan_in_bins=[]", "fan_in_bins=[]: expected a non-empty list of bins {name, lo, hi}"),
    ("fan_in_bins=[{name:a,lo:2,hi:null}]", "fan_in_bins[0].lo=2: expected 1"),
    ("fan_in_bins=[{name:a,lo:1,hi:3},{name:b,lo:2,hi:null}]", "fan_in_bins[1].lo=2: expected 4"),
    ("fan_in_bins=[{name:a,lo:1,hi:1.5},{name:b,lo:2,hi:null}]", "fan_in_bins[0].hi=1.5: expected an integer >= lo=1"),
    ("fan_in_bins=[{name:a,lo:1,hi:1},{name:b,lo:2,hi:4}]", "fan_in_bins[1].hi=4: expected null for the last bin"),
    ("dataset.root=", "dataset.root='': expected the data folder"),
])
def test_check_params_rejects(override, message):
    from fanin.core.config import check_params
    with pytest.raises(ConfigError) as e:
        check_params(compose([override]))
    assert str(e.value).startswith(message), str(e.value)


def test_check_params_reports_every_bad_parameter_and_passes_good_ones():
    from fanin.core.config import check_params
    with pytest.raises(ConfigError) as e:
        check_params(compose(["k=abc", "k_summary=1.5", "reader_llm=openai", "reader_llm.concurrency=0"]))
    assert str(e.value).startswith("3 bad run parameters") and "reader_llm.concurrency=0" in str(e.value)
    for o in [[], ["k=8", "k_summary=null"], ["experiment=paper"], ["experiment=smoke"], ["experiment=topk"], ["llm=vllm"],
              ["judge_llm=openai"], ["dataset=authtrace_tiny"]]:
        check_params(compose(o))


def test_k_is_never_truncated():
    from fanin.core.config import k_for
    with pytest.raises(ConfigError, match=r"k=1.5: expected a positive integer \(k=2\)"):
        k_for(compose(["k=1.5"]), "single-fact")
    with pytest.raises(ConfigError, match="k_summary=abc"):
        k_for(compose(["k_summary=abc"]), "summary", {"summary"})
    assert k_for(compose(["k=3", "k_summary=7"]), "summary", {"summary"}) == 7


def test_the_k_rule_is_the_datasets():
    "k_summary applies to the dataset's declared broad question types only, never to a type name the lab knows."
    from fanin.core.config import k_for
    cfg = compose(["k=3", "k_summary=7"])
    assert k_for(cfg, "summary", frozenset()) == 3 and k_for(cfg, "OE", {"OE"}) == 7


def test_an_emptied_page_stops_before_work(data):
    "A gold page emptied to 0 bytes (or to its title line alone) is named, not read as a page with nothing to find."
    page = data / TOPIC / "reference_pages" / "Bolaven damage in Korea.txt"
    for emptied in ("", "# Bolaven damage in Korea\n\n  \n"):
        page.write_text(emptied, encoding="utf-8")
        e = data_error(data)
        (p,) = [p for p in e.problems if p.field == "<page text>"]
        assert p.path.endswith("Bolaven damage in Korea.txt") and "no text after the title line" in p.value and "fanin data" in p.fix


def test_an_absurdly_long_question_line_stops_before_work(data):
    "A question line of megabytes is refused with its line, not validated and scored for minutes."
    qa = data / QA
    lines = qa.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"question": "', '"question": "' + "x" * 2_000_000, 1)
    qa.write_text("\n".join(lines) + "\n", encoding="utf-8")
    e = data_error(data)
    (p,) = [p for p in e.problems if p.line == 2]
    assert p.field == "<line>" and "bytes" in p.value and "repair or delete" in p.fix


def test_a_misspelt_added_key_is_refused():
    with pytest.raises(ConfigError, match=r"adds a key 'k_sumary' that no part of the lab reads.*'k_summary=3'"):
        compose(["+k_sumary=3"])


def test_an_outputs_path_that_is_a_file_stops_before_work(tmp_path):
    from fanin.core.config import check_params
    f = tmp_path / "not-a-folder"; f.write_text("x")
    with pytest.raises(ConfigError, match=r"paths.outputs=.*is a file, not a folder"):
        check_params(compose([f"paths.outputs={f}"]))


def test_a_misplaced_override_names_its_group():
    with pytest.raises(ConfigError, match=r"write 'dataset.domains=\[culture\]'"):
        compose(["domains=[culture]"])


# ---- pages that are not what they look like ---------------------------------------------------------------------------------
BOLAVEN = "Bolaven damage in Korea.txt"


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),       # a read would wait for a writer forever
    (lambda p: p.mkdir(), "a folder"),
    (lambda p: p.symlink_to("/dev/zero"), "a character device"),   # a read would never end
])
def test_a_page_that_is_not_a_regular_file_is_named_before_any_read(data, make, kind):
    page = data / TOPIC / "reference_pages" / BOLAVEN
    page.unlink()
    make(page)
    e = data_error(data)
    (p,) = e.problems
    assert (p.path, p.line, p.value) == (str(page), None, kind)
    assert "\n" not in str(e) and str(page) in str(e) and "a regular file" in str(e)


def test_a_questions_file_that_is_a_fifo_is_named(data):
    (data / QA).unlink()
    os.mkfifo(data / QA)
    e = data_error(data)
    assert [(p.path, p.value) for p in e.problems] == [(str(data / QA), "a FIFO (named pipe)")]


def test_a_page_of_control_bytes_stops_before_work(data):
    page = data / TOPIC / "reference_pages" / BOLAVEN
    page.write_bytes(b"# Bolaven damage in Korea\n" + bytes(range(0, 9)) * 300 + b"\x1b[0m" * 50 + b" some words\n")
    e = data_error(data)
    (p,) = e.problems
    assert p.path == str(page) and p.field == "<page text>" and "control" in p.value and "\n" not in str(e)


def test_a_page_of_replacement_and_format_characters_stops(data):
    page = data / TOPIC / "reference_pages" / BOLAVEN
    page.write_text("# Bolaven damage in Korea\n" + "\ufffd\u200b\ue000" * 400 + "\nBolaven hit Korea.\n", encoding="utf-8")
    (p,) = data_error(data).problems
    assert p.path == str(page) and "U+FFFD" in p.value


def test_a_page_with_a_few_control_characters_loads(data):
    page = data / TOPIC / "reference_pages" / BOLAVEN
    page.write_text(page.read_text(encoding="utf-8") + "\x07\x00\ufffd\u200b\n", encoding="utf-8")
    assert load(data).corpus("nature")


# ---- one URL, one document ----------------------------------------------------------------------------------------------------
def test_a_url_listed_under_two_titles_counts_once(data):
    "The same article under a second headline, with its own page: fan-in counts it once (the first reference's page), and says so."
    from fanin.core.schema import DataWarning
    from fanin.data.wildgraphbench import WildGraphBench
    refs = data / TOPIC / "references.jsonl"
    refs.write_text(refs.read_text() + '{"title": "Vicente: Hong Kong raises Signal 10", "url": "https://example.org/vicente", "archive_url": ""}\n')
    (data / TOPIC / "reference_pages" / "Vicente Hong Kong raises Signal 10.txt").write_text(
        "# Vicente: Hong Kong raises Signal 10\n\nThe Hong Kong Observatory raised Hurricane Signal No. 10 for Typhoon Vicente.\n")
    with pytest.warns(DataWarning) as w:
        b = WildGraphBench(data, domains=["nature"])
    assert [i.fan_in for i in b.instances()] == [1, 2, 3, 0]   # as without the second title
    assert b.instances()[0].gold_docs == ["nature/Typhoon Vicente Signal No 10 raised"]
    msg = [str(x.message) for x in w if "several titles" in str(x.message)]
    assert len(msg) == 1 and "1 url(s), cited 2 time(s) by 2 question(s)" in msg[0] and "QA/nature/questions.jsonl:1 https://example.org/vicente" in msg[0]
    assert b.same_url[["line", "ref_url", "gold_doc", "other_docs"]].values.tolist() == [
        [1, "https://example.org/vicente", "nature/Typhoon Vicente Signal No 10 raised", "nature/Vicente Hong Kong raises Signal 10"],
        [3, "https://example.org/vicente", "nature/Typhoon Vicente Signal No 10 raised", "nature/Vicente Hong Kong raises Signal 10"]]
    r = b.resolution
    assert r.ambiguous.sum() == 2 and (r[r.ambiguous].gold_doc == "nature/Typhoon Vicente Signal No 10 raised").all()
    assert b.resolution_summary()["same_url_pages_not_counted"] == 2
    assert "nature/Vicente Hong Kong raises Signal 10" in b.corpus("nature")   # the copy stays, as a distractor


def test_a_gold_statement_written_twice_or_empty_is_named(data):
    "Recall over a summary's statements would count a repeated fact twice, and an empty one as a fact no answer holds."
    edit_line(data / QA, 3, '"Bolaven caused 430 billion won of damage in South Jeolla."]',
              '"Bolaven caused 430 billion won of damage in South Jeolla.", "Vicente  injured over 130 people in Hong Kong.", " "]')
    e = data_error(data)
    assert [(p.line, p.field) for p in e.problems] == [(3, "gold_statements[2]"), (3, "gold_statements[3]")]
    assert "not already at gold_statements[0]" in str(e) and "delete gold_statements[2]" in str(e)
