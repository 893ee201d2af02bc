"""The lab as a person sees it, in a real browser (headless Chromium from Debian's packages, driven by Playwright):

- the documentation site (`make docs`: docs/build.py, reused when no notebook changed) served on a free localhost port: the index
  and two notebook pages load with their title, prose and example code, nothing is fetched from outside, and no page carries a
  rendering error;
- JupyterLab on nbs/ (`make lab`'s server) on a free port with a token: a notebook opens and renders its heading and code cells.

Screenshots go to outputs/screenshots/. Chromium comes from `make test` (`make browser`: apt-get as root); where it is absent and
cannot be installed, these tests skip and say so."""
from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
SHOTS = ROOT / "outputs" / "screenshots"
DOCS = ROOT / "outputs" / "docs"
CHROMIUM = Path("/usr/bin/chromium")
# the flags this machine needs: no sandbox as root, and none of Chromium's own connections (the network is closed)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DOC_PAGES = ["00_schema", "05_systems"]
LAB_NOTEBOOK = "00_schema"

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium as root "
                "(apt-get install chromium chromium-driver)", allow_module_level=True)
import playwright.sync_api as playwright  # noqa: E402  (the dev extra: make setup)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nb_cells(name: str) -> list[dict]:
    return json.loads((NBS / f"{name}.ipynb").read_text())["cells"]


def nb_title(name: str) -> str:
    first = next(c for c in nb_cells(name) if c["cell_type"] == "markdown")
    return next(line[2:].strip() for line in "".join(first["source"]).splitlines() if line.startswith("# "))


def example_line(name: str) -> str:
    "The first line of the notebook's first example: a code cell that is neither exported nor hidden."
    for c in nb_cells(name):
        src = "".join(c["source"])
        if c["cell_type"] == "code" and not src.lstrip().startswith("#|"):
            line = next(line for line in src.splitlines() if line.strip())
            return line.strip()
    raise AssertionError(f"nbs/{name}.ipynb has no example cell")


def prose_line(name: str) -> str:
    "A sentence of the notebook's prose after its title and description."
    for c in nb_cells(name):
        for line in "".join(c["source"]).splitlines() if c["cell_type"] == "markdown" else []:
            if len(line) > 60 and not line.startswith(("#", ">", "-", "|")) and "`" not in line[:40] and "*" not in line[:40]:
                return line[:40]
    raise AssertionError(f"nbs/{name}.ipynb has no prose line")


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def docs_site():
    "The full site, built by `make docs`'s builder; a second run with no notebook changed only checks the manifest."
    res = subprocess.run([sys.executable, str(ROOT / "docs" / "build.py"), "--out", str(DOCS)],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, f"docs build failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    site = DOCS / "site"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", site
    server.shutdown()
    server.server_close()


def test_docs_site_has_every_notebook(docs_site):
    _, site = docs_site
    missing = [p.stem for p in NBS.glob("*.ipynb") if not (site / f"{p.stem}.html").exists()]
    assert not missing, f"notebooks without a page: {missing}"


def _load(page, url: str, shot: Path):
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("http://127.0.0.1", "data:", "blob:")) else None)
    resp = page.goto(url, wait_until="load")
    assert resp is not None and resp.status == 200, f"{url}: HTTP {resp and resp.status}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=False)
    return outside


def test_docs_pages_render_in_chromium(browser, docs_site):
    base, _ = docs_site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    outside = _load(page, f"{base}/index.html", SHOTS / "docs_index.png")
    body = page.inner_text("article")
    assert page.inner_text("article h1") == "fanin"
    for name in DOC_PAGES:  # the index lists the notebooks by title and links them
        assert nb_title(name) in body
        assert page.locator(f'article a[href="{name}.html"]').count() >= 1
    for name in DOC_PAGES:
        outside += _load(page, f"{base}/{name}.html", SHOTS / f"docs_{name}.png")
        article = page.inner_text("article")
        assert len(article) > 2000, f"{name}: the page is (nearly) empty: {article[:200]!r}"
        assert page.inner_text("article h1").strip() == nb_title(name)
        assert prose_line(name) in article, f"{name}: the notebook's prose is missing"
        code = "\n".join(page.locator("article .highlight pre, article pre").all_inner_texts())
        assert example_line(name) in code, f"{name}: the example {example_line(name)!r} is not on the page"
        assert page.locator("article h3, article h4").count() >= 1, f"{name}: no reference card (show_doc) on the page"
        if name == DOC_PAGES[-1]:  # an example further down the page, in view
            page.locator("article pre", has_text=example_line(name)).first.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / f"docs_{name}_example.png"))
        for bad in ("Traceback (most recent call last)", "NotebookValidationError", "Error in notebook"):
            assert bad not in article, f"{name}: the page shows a rendering error ({bad})"
    assert not outside, f"the site fetched from outside localhost: {outside[:5]}"
    page.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    "`make lab`'s server (jupyter lab nbs) on a free port with a token; its settings and state in a temporary folder."
    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.exists(), f"{jupyter} is missing: jupyterlab is in the dev extra (make setup)"
    home = tmp_path_factory.mktemp("jupyter")
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"), "IPYTHONDIR": str(home / "ipython")}
    # the test's own settings: no autosave (opening a notebook must never write it), no news prompt
    for plugin, values in {"docmanager-extension/plugin": {"autosave": False},
                           "apputils-extension/notification": {"fetchNews": "false"}}.items():
        f = home / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))
    log = (home / "lab.log").open("w")
    proc = subprocess.Popen([str(jupyter), "lab", "nbs", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                             "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
                            + (["--allow-root"] if os.geteuid() == 0 else []),
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):  # up to about two minutes for the server to answer
            if proc.poll() is not None:
                break
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            time.sleep(0.5)
        else:
            raise AssertionError("JupyterLab did not answer")
        assert proc.poll() is None, f"JupyterLab exited ({proc.returncode}):\n{(home / 'lab.log').read_text()[-3000:]}"
        yield url, token
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def test_notebook_renders_in_jupyterlab(browser, lab):
    url, token = lab
    before = (NBS / f"{LAB_NOTEBOOK}.ipynb").read_bytes()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{url}/lab/tree/{LAB_NOTEBOOK}.ipynb?token={token}", wait_until="load")
    title = nb_title(LAB_NOTEBOOK)
    # the notebook's first markdown heading, rendered by JupyterLab's markdown renderer
    heading = page.locator(".jp-Notebook .jp-MarkdownOutput h1").first
    heading.wait_for(timeout=120_000)
    assert title in heading.inner_text()
    # a code cell with the notebook's source in its editor
    code_cells = page.locator(".jp-Notebook .jp-CodeCell")
    # JupyterLab renders cells progressively (its windowed notebook fills in off-screen cells when idle): wait for the third
    code_cells.nth(2).wait_for(state="attached", timeout=60_000)
    assert code_cells.count() >= 3
    first_code = next("".join(c["source"]) for c in nb_cells(LAB_NOTEBOOK) if c["cell_type"] == "code").splitlines()[0]
    editor = code_cells.first.locator(".cm-content")
    editor.wait_for(timeout=60_000)
    assert first_code.strip() in editor.inner_text(), f"{first_code!r} not in the first code cell: {editor.inner_text()[:300]!r}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"lab_{LAB_NOTEBOOK}.png"))
    page.close()
    assert (NBS / f"{LAB_NOTEBOOK}.ipynb").read_bytes() == before, "opening the notebook changed it"
