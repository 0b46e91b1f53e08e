"""The built docs site: grouped by the user's job, offline (no remote script, stylesheet or font:
search and code highlighting ship with the theme), the API pages rendered from the docstrings
(roles as code, torch signatures), and checked in a real browser (headless Chromium screenshots
of the home, a porting and the API page, and a search; skipped when there is no chromium)."""
import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = ["Get started", "Write once", "Port a Gluon project", "Parity tests", "Reference", "Benchmarks"]
REMOTE = re.compile(r"<(?:script[^>]*\ssrc|link[^>]*\shref)=\"(?:https?:)?//[^\"]+\"", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    t0 = time.time()
    # no -q: mkdocs -q drops warnings before --strict counts them (a griffe docstring warning passed so)
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1", OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    seconds = time.time() - t0
    assert seconds < 60, f"mkdocs build took {seconds:.0f} s (make test runs it first; measured ~5 s)"
    return str(out)


def _html(site):
    return {os.path.relpath(p, site): open(p, encoding="utf-8").read()
            for p in glob.glob(os.path.join(site, "**", "*.html"), recursive=True)}


def test_the_nav_is_grouped_by_job_and_porting_starts_at_its_start_page():
    import yaml
    nav = yaml.safe_load(open(os.path.join(ROOT, "mkdocs.yml")))["nav"]
    assert [next(iter(item)) for item in nav] == JOBS
    porting = next(item for item in nav if "Port a Gluon project" in item)["Port a Gluon project"]
    assert list(porting[0].values()) == ["porting-project.md"]
    order = [next(iter(p.values())) for p in porting]
    for before, after in [("translate.md", "porting.md"), ("porting.md", "porting-trainer.md"),
                          ("porting-trainer.md", "porting-proof.md"), ("porting-proof.md", "translate-exported.md")]:
        assert order.index(before) < order.index(after), order     # model, weights, recipe, run proof, exported


def test_every_page_is_in_the_nav():
    text = open(os.path.join(ROOT, "mkdocs.yml")).read()
    in_nav = set(re.findall(r":\s*([\w\-]+\.md)\s*$", text, re.M))
    pages = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))}
    assert not pages - in_nav, f"pages not in mkdocs.yml's nav: {sorted(pages - in_nav)}"


def test_nothing_is_loaded_from_the_network(site):
    pages = _html(site)
    assert len(pages) >= 30
    remote = {p: REMOTE.findall(h) for p, h in pages.items() if REMOTE.search(h)}
    assert not remote, remote
    assert not [p for p, h in pages.items() if "fonts.googleapis" in h or "fonts.gstatic" in h]
    for css in glob.glob(os.path.join(site, "assets", "**", "*.css"), recursive=True):
        assert not re.search(r"@import\s+url\([\"']?https?:", open(css).read()), css


def test_code_is_highlighted_at_build_time_and_search_ships_its_index(site):
    home = open(os.path.join(site, "index.html")).read()
    assert '<span class="kn">import</span>' in home          # pygments spans: no script needed to colour
    assert glob.glob(os.path.join(site, "assets", "javascripts", "workers", "search.*.js"))
    index = json.load(open(os.path.join(site, "search", "search_index.json")))
    assert any("translate" in d["location"] for d in index["docs"])


def test_api_pages_render_roles_and_torch_signatures(site):
    pages = _html(site)
    api = {p: re.sub(r"<[^>]+>", "", h) for p, h in pages.items() if p.startswith("api")}
    assert len(api) == 10, sorted(api)
    raw = {p: re.findall(r":(?:class|func|meth|mod|attr|math|data|exc):`?", t) for p, t in api.items()}
    assert not any(raw.values()), {p: len(r) for p, r in raw.items() if r}
    nn = pages[os.path.join("api-nn", "index.html")]
    conv = nn[nn.index('id="dualdl.nn.layers.Conv2d"'):][:4000]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", conv)).replace("&#39;", "'")
    assert "Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0" in text, text[:500]
    port = pages[os.path.join("api-port", "index.html")]
    assert 'id="dualdl.port.translate.api.translate"' in port or "dualdl.port.translate" in port


def test_in_chromium_the_pages_render_and_search_answers(site, tmp_path):
    from docs_browser import chromium, check
    if chromium() is None:
        pytest.skip("no chromium on PATH (apt-get install chromium): the browser check needs it")
    found = check(site, str(tmp_path))
    assert found["home"]["title"].startswith("Home") and found["home"]["highlighted"] > 5, found
    assert found["porting"]["title"].startswith("Start here") and found["porting"]["highlighted"] > 5, found
    assert found["api"]["title"].startswith("dualdl.nn"), found
    assert found["search"]["results"] >= 3, found
    for name in ("home", "porting", "api", "search"):
        assert (tmp_path / f"{name}.png").stat().st_size > 20_000, name
