"""The docs stay true to the code: every layer is documented, every nav page exists."""
import os
import re

from dualdl.nn.layers import LAYERS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_layer_is_in_the_models_page():
    text = open(os.path.join(ROOT, "docs", "models.md")).read()
    missing = [name for name in LAYERS if f"`{name}`" not in text]
    assert not missing, f"docs/models.md lacks {missing}"


def test_every_nav_page_exists():
    nav = open(os.path.join(ROOT, "mkdocs.yml")).read()
    pages = re.findall(r":\s*([\w\-]+\.md)", nav)
    assert pages
    missing = [p for p in pages if not os.path.exists(os.path.join(ROOT, "docs", p))]
    assert not missing, missing


def test_every_environment_variable_is_listed_and_documented():
    from dualdl.config import VARIABLES
    names = set()
    for pkg in ("dualdl", "dualdl_torch", "dualdl_mx"):
        for folder, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in files:
                if f.endswith(".py"):
                    names |= set(re.findall(r"DUALDL_[A-Z_]+[A-Z]", open(os.path.join(folder, f)).read()))
    assert names and not names - set(VARIABLES), sorted(names - set(VARIABLES))
    text = open(os.path.join(ROOT, "docs", "config.md")).read()
    missing = [name for name in VARIABLES if f"`{name}`" not in text]
    assert not missing, f"docs/config.md lacks {missing}"
