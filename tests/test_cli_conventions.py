"""What every ``dualdl`` subcommand shares (issue 44): ``--version``; one-line errors with exit 2
and no argparse usage block; ``--help`` showing each option's default; progress on stderr with
``--progress`` and none with ``--quiet`` or off a terminal; hints in the flags' words; the usual
file modes; docs/cli.md generated from the parsers."""
import os
import stat

import pytest

from dualdl.cli import SUBCOMMANDS, _shows, main, subcommand_parser

from test_port_cli import SMALL  # noqa: E402  (the same small Gluon model)

PARITY = '''import dualdl as dl


class Raises(dl.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = dl.nn.Linear(4, 3)

    def forward(self, x):
        raise KeyError("no such column in my model")


class Drops(dl.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop = dl.nn.Linear(4, 3), dl.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x))
'''


def _module(tmp_path, monkeypatch, name, text):
    import sys
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


def test_version(capsys):
    import dualdl
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"dualdl {dualdl.__version__}"


@pytest.mark.parametrize("argv", [["launch"], ["launch", "--nproc", "x", "s.py"], ["demo", "--epochs", "x"],
                                  ["info", "--bad"], ["convert", "a"], ["parity", "m:f"], ["translate"],
                                  ["--bad"], ["nothing"]])
def test_argument_errors_are_one_line_without_the_usage_block(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "usage:" not in err, err
    assert err.startswith(f"dualdl {argv[0]}: " if argv[0] in SUBCOMMANDS else "dualdl: "), err


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_help_shows_every_default(name):
    p = subcommand_parser(name, width=100)
    text = p.format_help()
    fmt = p._get_formatter()
    for a in p._actions:
        if a.option_strings and _shows(a.default):
            assert "default" in fmt._get_help_string(a).lower(), (name, a.option_strings)
    assert "--quiet" in text and "--progress" in text


def test_cli_reference_page_is_generated_from_the_parsers():
    from dualdl.cli_reference import reference
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "cli.md")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    assert page == reference(), "docs/cli.md is stale: run `python -m dualdl.cli_reference`"
    for name in SUBCOMMANDS:
        assert f"## dualdl {name}" in page and f"usage: dualdl {name}" in page


def test_demo_with_an_unknown_backend_is_one_line(tmp_path, capsys):
    assert main(["demo", "--backends", "tensorflow", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("dualdl demo: --backends tensorflow: unknown backend 'tensorflow'; known backends: mxnet, "
                   "torch"), err


def test_parity_a_model_that_raises_is_one_line_naming_its_line(tmp_path, monkeypatch, capsys):
    mod = _module(tmp_path, monkeypatch, "par_raises_mod", PARITY)
    assert main(["parity", f"{mod}:Raises", "--input-shape", "2,4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"dualdl parity: KeyError at {mod}.py:10: 'no such column in my model'", err


def test_parity_hint_names_the_flag_and_progress_goes_to_stderr(tmp_path, monkeypatch, capsys):
    """Dropout draws other masks on each backend: the check fails (exit 1) and its advice is the
    flag, --float64, not the Python argument float64_reference=True."""
    mod = _module(tmp_path, monkeypatch, "par_drops_mod", PARITY)
    assert main(["parity", f"{mod}:Drops", "--input-shape", "8,4", "--progress"]) == 1
    out = capsys.readouterr()
    assert "diagnosis: run with --float64 to tell fp32 rounding" in out.out and "float64_reference" not in out.out
    lines = out.err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[dualdl parity 0.0 s] building") and "done" in lines[1], lines


def test_translate_progress_quiet_and_file_modes(tmp_path, monkeypatch, capsys):
    """--progress: a line per step on stderr (none off a terminal by default, none with --quiet);
    the three files (and convert's output) get 0666 less the umask, not safetensors' 0600."""
    mod = _module(tmp_path, monkeypatch, "conv_small_mod", SMALL)
    old = os.umask(0o027)
    try:
        assert main(["translate", f"{mod}:make", "--input-shape", "2,4", "--out", "a", "--progress"]) == 0
        steps = capsys.readouterr().err.strip().splitlines()
        assert [s.split("] ", 1)[1].split(" ", 1)[0] for s in steps] == [
            "importing", "tracing", "traced", "publishing", "done:"], steps
        assert all(s.startswith("[dualdl translate ") for s in steps)
        for f in ("make.py", "make.safetensors", "make.report.json"):
            assert stat.S_IMODE(os.stat(tmp_path / "a" / f).st_mode) == 0o640, f
        assert main(["convert", "a/make.safetensors", "w.params", "--progress"]) == 0
        assert stat.S_IMODE(os.stat(tmp_path / "w.params").st_mode) == 0o640
        assert "[dualdl convert" in capsys.readouterr().err
    finally:
        os.umask(old)
    for quiet in (["--quiet"], []):
        assert main(["translate", f"{mod}:make", "--input-shape", "2,4", "--out", "b", *quiet]) == 0
        out = capsys.readouterr()
        assert out.err == "" and "translate make: OK" in out.out
    assert main(["translate", f"{mod}:make", "--input-shape", "2,4", "--out", "c", "--progress", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, says", [
    (["demo", "--epochs", "-1"], "dualdl demo: --epochs must be >= 1, got -1"),
    (["demo", "--devices", "0"], "dualdl demo: --devices must be >= 1, got 0"),
    (["demo", "--lr", "nan"], "dualdl demo: --lr must be a positive finite number, got nan"),
    (["demo", "--out", "afile"], "dualdl demo: --out afile is not a folder; give a folder for the plot and the report"),
    (["launch", "--nproc", "100000", "s.py"], "dualdl launch: error: --nproc 100000 starts more processes than this "
                                              "host can run"),
    (["launch", "--grace", "nan", "s.py"], "dualdl launch: error: --grace must be a finite number of seconds, got nan"),
    (["parity", "m:f", "--input-shape", "2,4", "--rtol", "nan"], "dualdl parity: --rtol must be a finite number >= 0"),
])
def test_bad_numbers_are_refused_before_anything_runs(tmp_path, monkeypatch, capsys, argv, says):
    """Used to train on (demo --epochs -1 ended in matplotlib's "cannot be log-scaled"), start 100,000
    processes (launch --nproc 100000), or report a FAIL for rtol nan."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "s.py").write_text("print('ran')\n")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(says), err
    assert not (tmp_path / "demo_output").exists()
