"""The docs stay true to the code: every layer is documented (the table generated from LAYERS), every
nav page exists."""
import os
import re

from dualdl.nn.layers import LAYERS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_models_page_has_the_layer_table_of_LAYERS():
    """docs/models.md's layer table is generated from LAYERS (tests/layer_docs_gen.py), text for text."""
    from layer_docs_gen import MODELS, layer_table, with_layer_table
    text = MODELS.read_text()
    assert text == with_layer_table(text), "docs/models.md: run python tests/layer_docs_gen.py"
    assert all(f"| `{name}` |" in layer_table() for name in LAYERS)


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
