"""Build the lab's documentation site from the notebooks in nbs/, offline: `make docs`.

The pages are nbdev's: every notebook goes through nbdev's own doc processors (`nbdev.processors.FilterDefaults`: frontmatter
from the `# Title` / `> description` cells, `#| hide` cells dropped, directives stripped, `show_doc` reference cards for every
exported name, made by executing the exported definitions and imports only). The processed notebooks are turned into a website
by mkdocs with mkdocs-jupyter (nbconvert) and the Material theme, instead of Quarto: PyPI's `quarto-cli` is a source package
that downloads Quarto's binaries from GitHub while it builds, which this machine (package registries only) cannot reach.

The notebooks' examples are not executed. The notebooks are committed without outputs, and some examples run real models for
minutes, so a page shows each notebook's prose and example code as written, with nbdev's reference cards for the exported names
(the same as nbdev's Quarto build, which renders a notebook's stored outputs and does not execute it).

Incremental: a notebook is reprocessed only when its content (or this file, or nbdev's version) changed; the key of each page
and of the whole site is kept in `OUT/manifest.json`, and the site is rebuilt only when some key changed.

    python docs/build.py [--out outputs/docs] [--only 00_schema,05_systems] [--force]

`--only` builds a site of just those notebooks (a smaller site, used by tests); the full site is the default.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"


def _patch_signature():
    """fastcore's show_doc evaluates string annotations (`from __future__ import annotations`) and only expects ValueError or
    TypeError; a name imported inside a function (`pd` for pandas) raises NameError there. Fall back to the unevaluated
    signature, which shows the annotation as written."""
    import inspect

    import fastcore.docments as docments

    def signature(obj, *args, eval_str=False, **kwargs):
        try:
            return inspect.signature(obj, *args, eval_str=eval_str, **kwargs)
        except NameError:
            return inspect.signature(obj, *args, **kwargs)

    docments.signature = signature


def _patch_eval():
    """nbdev runs, to make the reference cards, the exported cells, the `show_doc` cells and every cell that contains an import
    anywhere, examples included. Run the exported cells, the `show_doc` cells and cells of imports only: an example cell is shown
    as written and never run (some run real models for minutes)."""
    import ast
    import warnings

    import nbdev.processors as procs

    nbdev_eval = procs._do_eval
    warnings.filterwarnings("ignore", message="Found cells containing imports and other code")

    def _do_eval(cell):
        if not nbdev_eval(cell):
            return None
        if cell.directives_.keys() & {"export", "exports", "exporti", "exec_doc"}:
            return True
        trees = cell.parsed_()
        return all(isinstance(t, (ast.Import, ast.ImportFrom)) for t in trees) or bool(procs._show_docs(trees))

    procs._do_eval = _do_eval


def _split_title_cell(nb):
    """nbdev turns the first markdown cell with a `# Title` into front matter and drops the rest of that cell, and takes only the
    first line of a `> description`. The lab's notebooks go on with prose in that cell: keep `# Title` and the whole `>` quote
    (joined to one line) in the title cell, and move what follows into a markdown cell of its own."""
    from fastcore.nbio import mk_cell

    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        h1 = next((j for j, line in enumerate(lines) if line.startswith("# ")), None)
        if h1 is None:
            return
        j, quote = h1 + 1, []
        while j < len(lines) and (not lines[j].strip() and not quote or lines[j].startswith(">")):
            if lines[j].startswith(">"):
                quote.append(lines[j][1:].strip())
            j += 1
        head = lines[:h1 + 1] + ([] if not quote else ["", "> " + " ".join(quote)])
        rest = "\n".join(lines[j:]).strip()
        cell.source = "\n".join(head)
        if rest:
            nb.cells.insert(i + 1, mk_cell(rest, cell_type="markdown"))
        return


def _frontmatter_to_markdown(nb) -> tuple[str, str]:
    """nbdev moves `# Title` and `> description` into a Quarto front-matter raw cell; put them back as the page's heading."""
    title, description = "", ""
    for i, cell in enumerate(nb.cells):
        src = cell.source.strip()
        if cell.cell_type == "raw" and src.startswith("---") and src.endswith("---"):
            import yaml

            meta = yaml.safe_load(src.strip("-").strip()) or {}
            title, description = str(meta.get("title", "")), str(meta.get("description", ""))
            if title:
                text = f"# {title}" + (f"\n\n> {description}" if description else "")
                from fastcore.nbio import mk_cell

                nb.cells[i] = mk_cell(text, cell_type="markdown")
            break
    return title, description


_CELL_KEYS = {"cell_type", "id", "metadata", "source", "outputs", "execution_count", "attachments"}


def _quarto_directives(cell):
    """nbdev leaves Quarto's cell options (`#| echo: false`, `#| output: asis`, ...) for Quarto to apply; apply the ones that
    change what a page shows as nbconvert tags, drop the option lines, and drop nbdev's working keys (nbformat rejects them)."""
    for k in list(cell.keys()):
        if k not in _CELL_KEYS:
            del cell[k]
    cell.metadata.pop("execution", None)  # execnb's timings: not nbformat's schema
    if cell.cell_type != "code":
        return cell
    lines, opts = cell.source.splitlines(), {}
    while lines and lines[0].lstrip().startswith("#|"):
        key, _, val = lines.pop(0).lstrip()[2:].partition(":")
        opts[key.strip()] = val.strip().lower()
    cell.source = "\n".join(lines)
    if opts.get("include") == "false":
        return None
    tags = cell.metadata.setdefault("tags", [])
    if opts.get("echo") == "false":
        tags.append("remove_input")
    if opts.get("output") == "false":
        tags.append("remove_output")
    return cell


def process_one(job: tuple[str, str]) -> tuple[str, str, str, float]:
    """nbdev's doc processors on one notebook: src -> dst (a processed .ipynb). Returns (name, title, description, seconds)."""
    src, dst = Path(job[0]), Path(job[1])
    t0 = time.perf_counter()
    _patch_signature()
    _patch_eval()
    from fastcore.nbio import read_nb, write_nb
    from nbdev.processors import FilterDefaults

    os.environ["IN_TEST"] = "1"  # as nbdev's own doc build: code guarded by IN_TEST does not run
    cwd = Path.cwd()
    os.chdir(NBS)  # as in Jupyter: the examples' relative paths start in nbs/
    try:
        nb = read_nb(src)
        _split_title_cell(nb)
        FilterDefaults()(nb)
        title, description = _frontmatter_to_markdown(nb)
        nb.cells = [c for c in map(_quarto_directives, nb.cells) if c is not None]
        if not title:
            raise ValueError(f"{src}: no `# Title` markdown cell, so the page would have no heading")
        dst.parent.mkdir(parents=True, exist_ok=True)
        write_nb(nb, dst)
    finally:
        os.chdir(cwd)
    return src.stem, title, description, time.perf_counter() - t0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tool_key() -> str:
    from importlib.metadata import version

    pins = [f"{p}=={version(p)}" for p in ("nbdev", "fastcore", "mkdocs", "mkdocs-jupyter", "mkdocs-material", "nbconvert")]
    return hashlib.sha256((_sha(Path(__file__)) + " ".join(pins)).encode()).hexdigest()


MKDOCS_YML = """\
site_name: {title}
site_description: {description}
docs_dir: src
site_dir: site
use_directory_urls: false
theme:
  name: material
  font: false            # the system's fonts: nothing is fetched from a font CDN
  features: [navigation.top, search.highlight]
plugins:
  - search
  - mkdocs-jupyter:
      execute: false     # pages show the notebooks' source; the examples are not run (docs/build.py)
      include_source: false
      no_prompt: true      # no In[ ]/Out[ ] prompts, as in nbdev's pages
      include_requirejs: false
      remove_tag_config:
        remove_input_tags: [remove_input]
        remove_all_outputs_tags: [remove_output]
      cache_dir: {cache}
nav:
{nav}
"""


def build(out: Path, only: list[str] | None = None, force: bool = False, workers: int = 2) -> dict:
    out = out.resolve()
    src_dir, site_dir = out / "src", out / "site"
    nbs = sorted(NBS.glob("*.ipynb"))
    if only:
        missing = [n for n in only if not (NBS / f"{n}.ipynb").exists()]
        if missing:
            raise SystemExit(f"docs: no notebook nbs/{missing[0]}.ipynb (--only takes notebook names without .ipynb)")
        nbs = [p for p in nbs if p.stem in only]
    manifest_path = out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() and not force else {}
    tool = _tool_key()
    pages_old = old.get("pages", {}) if old.get("tool") == tool else {}

    keys = {p.stem: _sha(p) for p in nbs}
    todo = [p for p in nbs if pages_old.get(p.stem, {}).get("key") != keys[p.stem] or not (src_dir / p.name).exists()]
    t0 = time.perf_counter()
    pages = {k: v for k, v in pages_old.items() if k in keys}
    if todo:
        print(f"docs: processing {len(todo)} of {len(nbs)} notebooks with nbdev's doc processors", flush=True)
        jobs = [(str(p), str(src_dir / p.name)) for p in todo]
        sys.path.insert(0, str(Path(__file__).parent))
        import build as this  # by module name, so that the spawned workers can import the function
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per worker, as nbdev's own doc build
        with ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs))), mp_context=ctx) as ex:
            for name, title, description, secs in ex.map(this.process_one, jobs):
                pages[name] = {"key": keys[name], "title": title, "description": description}
                print(f"  {name}: {secs:.1f} s", flush=True)
    for stale in src_dir.glob("*.ipynb") if src_dir.exists() else []:
        if stale.stem not in keys:
            stale.unlink()
    t_proc = time.perf_counter() - t0

    site_key = hashlib.sha256(json.dumps([tool, sorted(keys.items())]).encode()).hexdigest()
    if old.get("site_key") == site_key and (site_dir / "index.html").exists() and not todo:
        print(f"docs: up to date ({len(nbs)} pages) -> {site_dir / 'index.html'}")
        return json.loads(manifest_path.read_text())

    _write_site_sources(out, nbs, pages)
    t1 = time.perf_counter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--clean", "-q", "-f", str(out / "mkdocs.yml")],
                         cwd=out, env=env, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"docs: mkdocs build failed (exit {res.returncode}):\n{res.stderr[-4000:]}")
    t_site = time.perf_counter() - t1
    manifest = {"tool": tool, "site_key": site_key, "pages": pages, "built": time.strftime("%Y-%m-%d %H:%M:%S"),
                "seconds": {"process": round(t_proc, 1), "site": round(t_site, 1)}}
    manifest_path.write_text(json.dumps(manifest, indent=1))
    print(f"docs: {len(nbs)} pages ({len(todo)} processed in {t_proc:.0f} s, site built in {t_site:.0f} s)"
          f" -> {site_dir / 'index.html'}")
    return manifest


def _write_site_sources(out: Path, nbs: list[Path], pages: dict):
    import tomllib

    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    src_dir = out / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(f"| [{pages[p.stem]['title']}]({p.name}) | {pages[p.stem]['description']} |" for p in nbs)
    (src_dir / "index.md").write_text(
        f"# {proj['name']}\n\n{proj['description']}\n\n"
        "Each page is a notebook of `nbs/`, the lab's source: prose, the exported code with its reference cards, and the "
        "examples (shown as written; run them in JupyterLab with `make lab`).\n\n"
        f"| Notebook | What it holds |\n| --- | --- |\n{rows}\n")
    nav = "  - Home: index.md\n" + "".join(f"  - {json.dumps(pages[p.stem]['title'])}: {p.name}\n" for p in nbs)
    (out / "mkdocs.yml").write_text(MKDOCS_YML.format(
        title=json.dumps(proj["name"]), description=json.dumps(proj["description"]),
        cache=json.dumps(str(out / ".cache")), nav=nav))


def locked_build(out: Path, **kw) -> dict:
    "One build at a time per build folder (`make docs` and the browser test may share outputs/docs)."
    from filelock import FileLock

    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".build.lock")):
        return build(out, **kw)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "outputs" / "docs"), help="build folder (git-ignored)")
    ap.add_argument("--only", default="", help="comma-separated notebook names: a site of just these pages")
    ap.add_argument("--force", action="store_true", help="reprocess every notebook")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    locked_build(Path(a.out), only=[s for s in a.only.split(",") if s] or None, force=a.force, workers=a.workers)


if __name__ == "__main__":
    main()
