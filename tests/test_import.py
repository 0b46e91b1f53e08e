import subprocess
import sys


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_import_dualdl_imports_no_framework():
    r = _run("import sys, dualdl, dualdl.cli; "
             "print(sorted(m for m in ('torch', 'mxnet') if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_every_lazy_name_resolves():
    import dualdl
    for name in sorted(dualdl._LAZY_SUBMODULES | set(dualdl._LAZY_NAMES)):
        assert getattr(dualdl, name) is not None, name


def test_every_cli_subcommand_has_its_module():
    import importlib
    from dualdl.cli import SUBCOMMANDS
    for name, (module, _) in SUBCOMMANDS.items():
        m = importlib.import_module(module)
        assert callable(m.add_arguments) and callable(m.run), name
