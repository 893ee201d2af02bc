"Malformed input and unknown names fail with errors that say where and what to do."
import pytest

from fanin.core.config import ConfigError, compose
from fanin.core.schema import Pack, RecordError, read_jsonl


def test_malformed_json_line(tmp_path):
    f = tmp_path / "packs.jsonl"
    f.write_text('{"instance_id": "a", "system": "s", "units": []}\n{"instance_id": "b", "system": \n')
    with pytest.raises(RecordError) as e:
        read_jsonl(f, Pack)
    assert e.value.line == 2 and str(f) in str(e.value) and "one JSON object per line" in str(e.value)


def test_wrong_field_type_names_field_and_value(tmp_path):
    f = tmp_path / "packs.jsonl"
    f.write_text('{"instance_id": "a", "system": "s", "units": [{"doc_id": "d", "text": "t", "score": 1, "rank": 0}]}\n')
    with pytest.raises(RecordError) as e:
        read_jsonl(f, Pack)
    assert (e.value.line, e.value.field, e.value.value) == (1, "units.0.rank", 0)
    assert "line 1" in str(e.value) and "units.0.rank" in str(e.value)


def test_missing_and_unknown_fields(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"system": "s"}\n')
    with pytest.raises(RecordError, match="instance_id"):
        read_jsonl(f, Pack)
    f.write_text('{"instance_id": "a", "system": "s", "colour": "red"}\n')
    with pytest.raises(RecordError, match="colour"):
        read_jsonl(f, Pack)


def test_truncated_tail_tolerated_only_when_asked(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"instance_id": "a", "system": "s"}\n{"instance_id": "b", "sys')
    assert [p.instance_id for p in read_jsonl(f, Pack, tolerate_truncated_tail=True)] == ["a"]
    with pytest.raises(RecordError):
        read_jsonl(f, Pack)


@pytest.mark.parametrize("override,group", [("system=nope", "system"), ("dataset=nope", "dataset"), ("embedder=nope", "embedder")])
def test_unknown_config_name_lists_options(override, group):
    with pytest.raises(ConfigError) as e:
        compose([override])
    assert f"configs/{group}/nope.yaml" in str(e.value) and "Available" in str(e.value)


def test_unknown_domain():
    from fanin.run.components import load_dataset
    with pytest.raises(ConfigError, match="unknown WildGraphBench domain"):
        load_dataset(compose(["dataset.domains=[atlantis]"]))


def test_cli_reports_config_errors(capsys):
    from fanin.doors.cli import main
    with pytest.raises(SystemExit) as e:
        main(["run", "system=nope"])
    assert e.value.code == 2 and "configs/system/nope.yaml" in capsys.readouterr().err


def test_unknown_judge_names_fail_before_any_work(tiny_overrides):
    from fanin.core.config import ConfigError
    from fanin.run.pipeline import run
    with pytest.raises(ConfigError, match="unknown judge 'nope'; available: .*proxy"):
        run(tiny_overrides + ["answer.judges=[nope]"], ["answer", "judge"])
    with pytest.raises(ConfigError, match="unknown evidence_judge 'nope'; available: .*document"):
        run(tiny_overrides + ["evidence.judges=[nope]"], ["evidence"])
