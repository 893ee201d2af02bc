"""A dataset in BEIR's layout loads on the Dataset contract and runs end to end (the hand-written fixture)."""
import pandas as pd

from fanin.run.pipeline import run


def test_a_beir_layout_dataset_loads_and_runs(tmp_path):
    from fanin.core.config import repo_root
    over = ["dataset=beir", f"dataset.root={repo_root() / 'tests' / 'fixtures' / 'beir_tiny'}", f"paths.outputs={tmp_path / 'outputs'}",
            "progress=false", "experiment_name=test", "system=bm25", "k=2", "k_summary=2"]
    f = run(over)[0]
    m = pd.read_csv(f / "metrics.csv").set_index("instance_id")
    assert list(m.fan_in) == [1, 2, 2] and (m.status == "ok").all()
    assert m.loc["typhoons/q1", "er"] == 1.0   # the Vicente query finds the Vicente passage
    assert (f / "tables" / "by_fan_in_bin.csv").exists()


def test_fanin_data_fetches_a_beir_dataset_from_a_mirror_and_stops_in_one_line_offline(tmp_path, monkeypatch, capsys):
    import hashlib
    import zipfile
    from fanin.data import beir_format
    from fanin.doors.cli import main
    from fanin.core.config import repo_root
    fix = repo_root() / "tests" / "fixtures" / "beir_tiny"
    (tmp_path / "mirror" / "beir").mkdir(parents=True)
    zp = tmp_path / "mirror" / "beir" / "typhoons.zip"
    with zipfile.ZipFile(zp, "w") as z:
        for f in sorted((fix / "typhoons").rglob("*")):
            if f.is_file(): z.write(f, f.relative_to(fix).as_posix())
    monkeypatch.setitem(beir_format.BEIR_MD5, "typhoons", hashlib.md5(zp.read_bytes()).hexdigest())
    monkeypatch.setenv("FANIN_OFFLINE", "1")
    monkeypatch.delenv("FANIN_DATA_MIRROR", raising=False)
    try: main(["data", "beir:typhoons", "--dest", str(tmp_path / "beir")])
    except SystemExit as e: code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "BEIR typhoons is not at" in err and "FANIN_DATA_MIRROR" in err and "Traceback" not in err
    monkeypatch.setenv("FANIN_DATA_MIRROR", str(tmp_path / "mirror"))
    main(["data", "beir:typhoons", "--dest", str(tmp_path / "beir")])
    assert f"use dataset=beir dataset.root={tmp_path / 'beir'}" in capsys.readouterr().out
    over = ["dataset=beir", f"dataset.root={tmp_path / 'beir'}", f"paths.outputs={tmp_path / 'outputs'}", "progress=false",
            "experiment_name=test", "system=bm25", "k=2", "k_summary=2"]
    f = run(over)[0]
    assert list(pd.read_csv(f / "metrics.csv").fan_in) == [1, 2, 2]
