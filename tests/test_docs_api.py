"""The API reference is generated from the code: every public name (``__all__``) of dualdl's modules
has an entry, under the name a user imports it by (tests/docs_api.py writes docs/api*.md)."""
import re
import sys

from docs_api import DOCS, MODULES, documented, pages, public, target


def test_the_api_pages_are_what_the_generator_writes():
    stale = [p for p, text in pages().items() if not (DOCS / p).exists() or (DOCS / p).read_text() != text]
    assert not stale, f"{stale}: run python tests/docs_api.py"


def test_every_public_name_has_an_entry():
    have = documented()
    missing = [f"{m}.{n}" for m in MODULES for n in public(m) if target(m, n) not in have]
    assert not missing, f"public names without an API entry: {missing} (add them to tests/docs_api.py PAGES)"
    assert len(have) >= 450, len(have)      # measured: 520 entries


def test_the_names_a_user_asked_for_are_there():
    text = "\n".join((DOCS / p).read_text() for p in pages())
    for shown in ("dualdl.port.translate", "dualdl.port.port", "dualdl.port.as_mapping",
                  "dualdl.port.translate_trainer", "dualdl.port.translate_recipe", "dualdl.nn.Conv2d",
                  "dualdl.nn.LSTM", "dualdl.nn.CrossEntropyLoss", "dualdl.testing.check_parity", "dualdl.Trainer"):
        assert f'heading: "{shown}"' in text, shown


def test_the_adapter_contract_is_under_extending_not_first():
    entries = {p: re.findall(r"^::: ([\w.]+)$", (DOCS / p).read_text(), re.M) for p in pages()}
    assert entries["api.md"][0] == "dualdl.backend.use", entries["api.md"][:3]
    assert "dualdl.backend.Backend" in entries["api-extending.md"]
    assert any(e.startswith("dualdl.contract.") for e in entries["api-extending.md"])
    elsewhere = [e for p, es in entries.items() if p != "api-extending.md" for e in es
                 if e == "dualdl.backend.Backend" or e.startswith("dualdl.contract.")]
    assert not elsewhere, elsewhere


def test_sphinx_roles_become_inline_code():
    sys.path.insert(0, str(DOCS / "_ext"))
    from sphinx_roles import convert
    assert convert("a :class:`~dualdl.devices.Device` from :func:`dualdl.use` and :math:`x^2`") == \
        "a `Device` from `dualdl.use()` and `x^2`"
    import dualdl.nn
    out = convert(dualdl.nn.Conv2d.__doc__)
    assert ":math:" not in out and ".. math::" not in out and "```text" in out
