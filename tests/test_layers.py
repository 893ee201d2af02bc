"""The README's module map is true: every module of src/fanin has a row, and no module imports one from a lower row (a higher
layer), at module level or inside a function — except `gateway.gateway_from_config`, which the README names."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layers() -> dict[str, int]:
    text = (ROOT / "README.md").read_text()
    table = text.split("Where things live", 1)[1].split("\n\n", 2)[1]
    rows = [l for l in table.splitlines() if l.startswith("| ") and not l.startswith("| layer")]
    return {m: i for i, row in enumerate(rows) for m in re.findall(r"`(\w+)`", row.split("|")[2])
            if (ROOT / "src" / "fanin" / f"{m}.py").exists()}


def test_every_module_has_a_row():
    level = _layers()
    mods = {p.stem for p in (ROOT / "src" / "fanin").glob("*.py")} - {"__init__", "_modidx"}
    assert mods <= set(level), f"modules missing from the README's module map: {sorted(mods - set(level))}"


def test_no_module_imports_a_higher_layer():
    level = _layers()
    bad = []
    for p in (ROOT / "src" / "fanin").glob("*.py"):
        if p.stem not in level: continue
        for line in p.read_text().splitlines():
            m = re.match(r"\s*from (?:fanin)?\.(\w+) import|\s*from fanin\.(\w+) import", line)
            if not m: continue
            dep = m.group(1) or m.group(2)
            if dep in level and level[dep] > level[p.stem] and not (p.stem, dep) == ("gateway", "pipeline"):
                bad.append(f"{p.stem} -> {dep}: {line.strip()}")
    assert not bad, "imports from a higher layer (README, 'Where things live'):\n" + "\n".join(bad)


def test_modules_and_functions_stay_readable():
    "No module over 600 lines; a function over 60 lines says why it is kept whole in a comment right above it."
    import ast
    big, long = [], []
    for p in sorted((ROOT / "src" / "fanin").glob("*.py")):
        if p.stem == "_modidx": continue
        lines = p.read_text().splitlines()
        if len(lines) > 600: big.append(f"{p.name}: {len(lines)} lines")
        for n in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 60:
                first = min([n.lineno] + [d.lineno for d in n.decorator_list])
                above = "\n".join(lines[max(0, first - 4):first - 1])
                if "kept whole" not in above: long.append(f"{p.name}: {n.name} ({n.end_lineno - n.lineno + 1} lines)")
    assert not big, f"modules over 600 lines (split the notebook): {big}"
    assert not long, f"functions over 60 lines without a '# N lines, kept whole: <why>' comment above them: {long}"
