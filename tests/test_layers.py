"""The README's module map is true: every module of src/fanin has a row, no module imports one from a lower row (a higher
layer), at module level or inside a function, in any spelling (`from .x import`, `from fanin.x import`, `import fanin.x`), and
the modules' imports form no circle, inside a layer or across layers."""
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


_IMPORT = re.compile(r"^\s*(?:from (?:fanin)?\.(\w+)(?:\.\w+)* import|from fanin\.(\w+)(?:\.\w+)* import|import fanin\.(\w+))", re.M)


def _imports() -> dict[str, set[str]]:
    "Each module's imports of other fanin modules, in any spelling, at module level or inside a function."
    mods = {p.stem: p for p in (ROOT / "src" / "fanin").glob("*.py") if p.stem not in ("__init__", "_modidx")}
    out = {}
    for m, p in mods.items():
        text = p.read_text()
        out[m] = {next(g for g in x if g) for x in _IMPORT.findall(text)} & set(mods) - {m}
    return out


def test_no_module_imports_a_higher_layer():
    level = _layers()
    bad = [f"{m} -> {d}" for m, deps in _imports().items() if m in level for d in deps if d in level and level[d] > level[m]]
    assert not bad, "imports from a higher layer (README, 'Where things live'):\n" + "\n".join(sorted(bad))


def test_no_import_circles():
    "A circle of imports (a -> b -> ... -> a), inside a layer or across layers, is a module pair that cannot be read apart."
    graph = _imports()
    circles, state = [], {}
    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1: circles.append(" -> ".join(path[path.index(d):] + [d]))
            elif d not in state: visit(d, path + [d])
        state[m] = 2
    for m in sorted(graph):
        if m not in state: visit(m, [m])
    assert not circles, "import circles:\n" + "\n".join(circles)


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
