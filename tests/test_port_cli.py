"""``dualdl convert``: real checkpoints from Gluon and torch converted and loaded by the other side."""
import os
import subprocess
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl import formats as F  # noqa: E402
from dualdl.cli import main  # noqa: E402


def _lstm_pair(bidirectional=True):
    from mxnet.gluon import rnn
    mx.random.seed(0)
    g = rnn.LSTM(6, num_layers=2, bidirectional=bidirectional, input_size=4)
    g.initialize(mx.init.Uniform(0.5))
    t = torch.nn.LSTM(4, 6, 2, bidirectional=bidirectional)
    return g, t


def _outputs(g, t, x):
    t.eval()
    with torch.no_grad():
        return g(mx.nd.array(x)).asnumpy(), t(torch.from_numpy(x))[0].numpy()


def test_gluon_params_to_torch_pth_and_back(tmp_path, capsys):
    g, t = _lstm_pair()
    g.save_parameters(str(tmp_path / "lstm.params"))
    assert main(["convert", str(tmp_path / "lstm.params"), str(tmp_path / "lstm.pth"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "(gluon, 16 tensors)" in out and "(torch, 16 tensors" in out and "bit-exact" in out
    sd = torch.load(tmp_path / "lstm.pth", weights_only=True)
    t.load_state_dict(sd, strict=True)
    x = np.random.default_rng(0).standard_normal((5, 2, 4)).astype(np.float32)
    a, b = _outputs(g, t, x)
    assert np.abs(a - b).max() < 1e-6
    # torch -> Gluon: load_parameters accepts the translated keys
    with torch.no_grad():
        t.bias_hh_l1_reverse.add_(0.25)
    torch.save(t.state_dict(), tmp_path / "changed.pt")
    assert main(["convert", str(tmp_path / "changed.pt"), str(tmp_path / "changed.params")]) == 0
    g.load_parameters(str(tmp_path / "changed.params"))
    a, b = _outputs(g, t, x)
    assert np.abs(a - b).max() < 1e-6


def test_dataparallel_prefix_is_stripped_and_can_be_added(tmp_path, capsys):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    torch.save({"state_dict": torch.nn.DataParallel(m).state_dict(), "epoch": 7},
               tmp_path / "dp.pth")
    assert main(["convert", str(tmp_path / "dp.pth"), str(tmp_path / "m.safetensors")]) == 0
    assert "stripped prefix 'module.' from 7 keys" in capsys.readouterr().out
    st = F.read_tensors(tmp_path / "m.safetensors")
    assert set(st) == set(m.state_dict())
    assert st["1.num_batches_tracked"].dtype == np.int64
    assert main(["convert", str(tmp_path / "m.safetensors"), str(tmp_path / "dp2.pt"),
                 "--add-prefix", "module."]) == 0
    dp = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)))
    dp.load_state_dict(torch.load(tmp_path / "dp2.pt", weights_only=True), strict=True)
    assert torch.equal(dp.module[0].weight, m[0].weight)


def test_convert_with_a_port_mapping(tmp_path, capsys):
    """A Gluon model-zoo checkpoint becomes a torch checkpoint for a differently-named torch model."""
    from mxnet.gluon.model_zoo import vision
    import dualdl as dl
    mx.random.seed(0)
    g = vision.get_model("mobilenet0.25", pretrained=False, classes=10)
    g.initialize(mx.init.Xavier())
    sys.path.insert(0, os.path.dirname(__file__))
    try:
        from test_port_vision import MobileNetV1
    finally:
        sys.path.pop(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    report = dl.port.port_gluon_to_torch(g, MobileNetV1(), x)
    assert report.ok
    report.save(tmp_path / "report.json")
    g.save_parameters(str(tmp_path / "zoo.params"))
    assert main(["convert", str(tmp_path / "zoo.params"), str(tmp_path / "zoo.pt"),
                 "--mapping", str(tmp_path / "report.json"), "--verify"]) == 0
    assert "applied mapping" in capsys.readouterr().out
    fresh = MobileNetV1().eval()
    fresh.load_state_dict(torch.load(tmp_path / "zoo.pt", weights_only=True), strict=True)
    with torch.no_grad():
        out = fresh(torch.from_numpy(x)).numpy()
    ref = g(mx.nd.array(x)).asnumpy()
    assert np.abs(out - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())


def test_bad_inputs_give_clear_errors_and_write_nothing(tmp_path, capsys):
    (tmp_path / "notes.pt").write_text("not a checkpoint")
    assert main(["convert", str(tmp_path / "notes.pt"), str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "notes.pt" in err and "unrecognised" in err
    F.write_safetensors(tmp_path / "ok.safetensors", {"w": np.ones(2, np.float32)})
    assert main(["convert", str(tmp_path / "ok.safetensors"), str(tmp_path / "out.xyz")]) == 2
    assert "extension" in capsys.readouterr().err
    (tmp_path / "map.json").write_text("[1, 2]")
    assert main(["convert", str(tmp_path / "ok.safetensors"), str(tmp_path / "out.pt"),
                 "--mapping", str(tmp_path / "map.json")]) == 2
    assert "port mapping" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.json", "notes.pt", "ok.safetensors"]


@pytest.mark.slow  # a fresh interpreter importing torch
def test_console_entry_point_runs(tmp_path):
    F.write_gluon(tmp_path / "a.params", {"0.gamma": np.ones(3, np.float32),
                                          "0.beta": np.zeros(3, np.float32)})
    proc = subprocess.run([sys.executable, "-m", "dualdl", "convert", str(tmp_path / "a.params"),
                           str(tmp_path / "a.pt"), "--verify"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(F.read_tensors(tmp_path / "a.pt")) == ["0.bias", "0.weight"]


def test_port_and_formats_import_no_framework():
    code = ("import sys, dualdl.port, dualdl.formats, dualdl.port.cli_convert; "
            "bad = [m for m in ('torch', 'mxnet') if m in sys.modules]; "
            "assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_destination_that_is_the_source_is_refused_and_the_original_kept(tmp_path, capsys,
                                                                         monkeypatch):
    """Same path, the same path spelled differently, a symbolic link and a hard link to it."""
    src = tmp_path / "m.params"
    F.write_gluon(src, {"0.weight": np.arange(6, dtype=np.float32).reshape(2, 3)})
    before = src.read_bytes()
    os.symlink(src, tmp_path / "link.params")
    os.link(src, tmp_path / "hard.params")
    monkeypatch.chdir(tmp_path)
    for dst in (str(src), "./m.params", "m.params", str(tmp_path / "sub" / ".." / "m.params"),
                "link.params", "hard.params"):
        if "sub" in dst:
            (tmp_path / "sub").mkdir(exist_ok=True)
        assert main(["convert", str(src), dst, "--to", "torch"]) == 2
        err = _one_line_error(capsys)
        assert "is the source file" in err and "--in-place" in err, err
        assert src.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.params", "link.params",
                                                          "m.params", "sub"]
    from dualdl.port.cli_convert import SameFileError, convert
    with pytest.raises(SameFileError, match="in_place=True"):
        convert(str(src), "./m.params", to="torch")
    assert src.read_bytes() == before


def test_in_place_conversion_when_asked(tmp_path, capsys):
    src = tmp_path / "m.params"
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    F.write_gluon(src, {"0.gamma": w[0], "0.beta": w[1]})
    os.symlink(src, tmp_path / "link.params")
    assert main(["convert", str(tmp_path / "link.params"), str(tmp_path / "link.params"),
                 "--to", "torch", "--in-place", "--verify"]) == 0
    assert "verified" in capsys.readouterr().out
    assert os.path.islink(tmp_path / "link.params")     # the link is kept, its target replaced
    assert F.detect_format(src) == "torch"
    back = F.read_tensors(src)
    assert sorted(back) == ["0.bias", "0.weight"]
    np.testing.assert_array_equal(back["0.weight"], w[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.params", "m.params"]


def test_missing_destination_folder_is_named(tmp_path, capsys):
    src = tmp_path / "m.safetensors"
    F.write_safetensors(src, {"w": np.ones(2, np.float32)})
    assert main(["convert", str(src), str(tmp_path / "out" / "m.pt")]) == 2
    err = _one_line_error(capsys)
    assert f"its folder {tmp_path / 'out'} does not exist" in err and ".tmp-" not in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]


# ---- dualdl translate: bad arguments exit 2 with one line, files are never clobbered ----------
SMALL = '''from mxnet import gluon


class Small(gluon.HybridBlock):
    def __init__(self, units=3):
        super().__init__()
        self.dense = gluon.nn.Dense(units, in_units=4)

    def hybrid_forward(self, F, x):
        return F.relu(self.dense(x))


def make():
    return Small()


def needs(n):
    return Small(n)


def fails():
    raise RuntimeError("no weights here\\nsecond line")


def not_a_block():
    return [1, 2]


NOT_CALLABLE = 3
'''


def _user_module(tmp_path, monkeypatch, text=SMALL, name=None):
    """A module of the user's in the current folder, under a name no other test imported."""
    name = name or "user_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


def _translate_main(args, capsys):
    code = main(["translate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


@pytest.mark.parametrize("extra, says", [
    (["--lr", "nan"], "--lr must be a positive finite number, got nan"),
    (["--lr", "inf"], "--lr must be a positive finite number, got inf"),
    (["--lr", "-0.1"], "--lr must be a positive finite number"),
    (["--lr", "0"], "--lr must be a positive finite number"),
    (["--seed", "-1"], "--seed must be 0 or more"),
    (["--input-high", "0"], "--input-high must be 1 or more"),
    (["--params", "missing.params"], "--params missing.params does not exist"),
    (["--name", "torch"], "would shadow the installed module 'torch'"),
    (["--name", "class"], "keyword"),
    (["--name", "a-b"], "must be a Python identifier"),
    (["--batchnorm", "mxnet"], "argument --batchnorm: invalid choice: 'mxnet'"),
])
def test_translate_bad_numbers_and_names_exit_2_with_one_line(tmp_path, monkeypatch, capsys, extra, says):
    mod = _user_module(tmp_path, monkeypatch)
    try:
        code, out, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "out", *extra], capsys)
    except SystemExit as e:          # argparse's own checks (choices, types)
        code, err = e.code, capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err and err.startswith("dualdl translate: "), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("factory, shape, says", [
    ("{mod}:needs", "2,4", "cannot be called without arguments (missing a required argument: 'n')"),
    ("{mod}:fails", "2,4", "fails() raised RuntimeError: no weights here second line"),
    ("{mod}:not_a_block", "2,4", "returned a list, not a Gluon Block"),
    ("{mod}:NOT_CALLABLE", "2,4", "is not callable (it is a int value)"),
    ("{mod}:nothing", "2,4", "has no attribute 'nothing'"),
    ("{mod}", "2,4", "expected MODULE:FACTORY"),
    ("no_such_module_xyz:make", "2,4", "cannot import module 'no_such_module_xyz': no module of that name"),
    ("{mod}:make", "2,x", "--input-shape must be comma-separated integers like 8,3,32,32, got '2,x'"),
    ("{mod}:make", "2,0", "--input-shape needs positive dimensions"),
    ("{mod}:make", "2,3", "Small does not run on sample inputs of shapes [(2, 3)] (MXNetError:"),
    ("{mod}:make", "2,4 2,4", "Small failed on sample inputs of shapes [(2, 4), (2, 4)] (TypeError: "),
    ("missing-symbol.json", "1,3", "missing-symbol.json does not exist"),
])
def test_translate_bad_factory_or_shape_exits_2_with_one_line(tmp_path, monkeypatch, capsys, factory, shape, says):
    mod = _user_module(tmp_path, monkeypatch)
    shapes = [a for sh in shape.split(" ") for a in ("--input-shape", sh)]
    code, out, err = _translate_main([factory.format(mod=mod), *shapes, "--out", "out"], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert not (tmp_path / "out").exists()


def test_factory_import_errors_name_the_module_and_the_cause(tmp_path, monkeypatch, capsys):
    mod = _user_module(tmp_path, monkeypatch, "import no_such_dependency_xyz\n", name="needs_dep_mod")
    code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "out"], capsys)
    assert code == 2 and err == ("dualdl translate: cannot import module 'needs_dep_mod': "
                                 "No module named 'no_such_dependency_xyz'"), err
    mod = _user_module(tmp_path, monkeypatch, "x = 1 +\n", name="syntax_err_mod")
    code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "out"], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "importing module 'syntax_err_mod' failed: SyntaxError" in err


def test_factory_in_a_script_that_parses_arguments_at_import(tmp_path, monkeypatch, capsys):
    """The script's argparse runs with sys.argv = [its file] and exits: one line that says so."""
    mod = _user_module(tmp_path, monkeypatch, "import argparse\np = argparse.ArgumentParser()\n"
                       "p.add_argument('--model', required=True)\nargs = p.parse_args()\n\n"
                       "def make():\n    pass\n", name="train_script_mod")
    argv = list(sys.argv)
    code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "out"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "module 'train_script_mod' exits when imported (status 2: train_script_mod.py: error: the following " \
           "arguments are required: --model): it parses command-line arguments at import" in err
    assert "if __name__ == '__main__':" in err and sys.argv == argv


def test_argparse_errors_are_one_line_exit_2(capsys):
    for args in (["m:f", "--input-shape", "2,4", "--out", "o", "--lr", "abc"], ["m:f", "--input-shape", "2,4"]):
        with pytest.raises(SystemExit) as e:
            main(["translate", *args])
        err = capsys.readouterr().err.strip()
        assert e.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("dualdl translate: "), err
    assert main(["translate", "m:f", "--out", "o"]) == 2
    assert capsys.readouterr().err.strip() == ("dualdl translate: give the sample inputs: --input-shape N,C,H,W "
                                               "(once per input) or --sample FILE.npz")


def test_translate_never_overwrites_a_file_it_did_not_write(tmp_path, monkeypatch, capsys):
    """`--out .` beside the user's own Gluon small.py: refused, the file kept; translate's own
    earlier output is replaced; --force replaces the user's file."""
    mod = _user_module(tmp_path, monkeypatch, name="small")
    before = (tmp_path / "small.py").read_bytes()
    code, _, err = _translate_main(["small:make", "--name", "small", "--input-shape", "2,4", "--out", "."], capsys)
    assert code == 2 and err == ("dualdl translate: ./small.py exists and was not written by dualdl translate; "
                                 "pass --force (force=True) to overwrite it, or choose another --out/--name"), err
    assert (tmp_path / "small.py").read_bytes() == before and sorted(os.listdir(tmp_path)) == ["small.py"]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "small.report.json").write_text('{"mine": 1}')
    code, _, err = _translate_main(["small:make", "--name", "small", "--input-shape", "2,4", "--out", "out"], capsys)
    assert code == 2 and "out/small.report.json exists and was not written by dualdl translate" in err
    (tmp_path / "out" / "small.report.json").unlink()
    code, out, _ = _translate_main(["small:make", "--name", "small", "--input-shape", "2,4", "--out", "out"], capsys)
    assert code == 0 and "translate small: OK" in out
    code, out, _ = _translate_main(["small:make", "--name", "small", "--input-shape", "2,4", "--out", "out", "--seed", "3"], capsys)
    assert code == 0 and '"ok": true' in (tmp_path / "out" / "small.report.json").read_text()   # its own: replaced
    # weights translate did not write (no metadata, no report naming them) are refused too
    (tmp_path / "out" / "small.report.json").unlink()
    from safetensors.numpy import save_file
    save_file({"w": np.ones(2, np.float32)}, str(tmp_path / "out" / "small.safetensors"))
    code, _, err = _translate_main(["small:make", "--name", "small", "--input-shape", "2,4", "--out", "out"], capsys)
    assert code == 2 and "out/small.safetensors exists and was not written" in err
    code, out, _ = _translate_main(["small:make", "--name", "small", "--input-shape", "2,4", "--out", ".", "--force"], capsys)
    assert code == 0 and "translate small: OK" in out
    assert (tmp_path / "small.py").read_bytes() != before
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith("small")) == [
        "small.py", "small.report.json", "small.safetensors"]


def test_out_that_is_a_file_or_a_folder_in_the_way(tmp_path, monkeypatch, capsys):
    mod = _user_module(tmp_path, monkeypatch)
    (tmp_path / "afile").write_text("x")
    code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "afile"], capsys)
    assert code == 2 and err == "dualdl translate: --out afile is a file; give a folder"
    (tmp_path / "o" / "net.py").mkdir(parents=True)
    code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "o", "--name", "net"], capsys)
    assert code == 2 and err == "dualdl translate: o/net.py is a folder; remove it or choose another name", err


@pytest.fixture
def tiny_mount(tmp_path):
    """Mount a real tmpfs (root with mount rights only): (path, options) -> folder."""
    import shutil
    import subprocess as sp
    mounted = []

    def make(name, options):
        d = tmp_path / name
        d.mkdir()
        if not shutil.which("mount") or sp.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)],
                                               capture_output=True).returncode:
            pytest.skip("cannot mount a tmpfs here (needs root with mount rights)")
        mounted.append(d)
        return d
    yield make
    for d in mounted:
        sp.run(["umount", str(d)], capture_output=True)


def test_full_disk_exits_2_and_leaves_no_files(tmp_path, monkeypatch, capsys, tiny_mount):
    mod = _user_module(tmp_path, monkeypatch)
    full = tiny_mount("full", "size=4k")       # one page: the staged source fits, the weights do not
    code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", str(full)], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "No space left on device" in err, err
    assert os.listdir(full) == []              # the staged files are removed, no report


def test_read_only_folder_exits_2(tmp_path, monkeypatch, capsys, tiny_mount):
    mod = _user_module(tmp_path, monkeypatch)
    ro = tiny_mount("ro", "ro,size=64k")
    for out in (ro, ro / "sub"):
        code, _, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", str(out)], capsys)
        assert code == 2 and err == f"dualdl translate: cannot write in {ro} (a read-only file system)", err


@pytest.mark.slow  # two fresh interpreters importing mxnet and torch
def test_a_torch_py_in_the_current_folder_is_never_imported(tmp_path):
    """`python -m dualdl` puts the current folder first on sys.path; the factory loader moves it
    after the installed packages, so ./torch.py and ./mxnet.py are not run, for a model-zoo
    factory and for the user's own module beside them."""
    for m in ("torch", "mxnet"):
        (tmp_path / f"{m}.py").write_text(f"open({str(tmp_path / ('MARK_' + m))!r}, 'w').write('ran')\n"
                                          f"raise SystemExit('shadowed {m}')\n")
    (tmp_path / "mine.py").write_text(SMALL)
    for factory in ("mxnet.gluon.model_zoo.vision:mobilenet0_25", "mine:make"):
        proc = subprocess.run([sys.executable, "-m", "dualdl", "translate", factory, "--input-shape",
                               "1,3,32,32" if "zoo" in factory else "2,4", "--out", "out", "--no-verify"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert not [p for p in os.listdir(tmp_path) if p.startswith("MARK_")]


def test_factory_loader_searches_the_current_folder_after_installed_packages(tmp_path, monkeypatch):
    """A module in the current folder named like an installed one (here the standard library's
    colorsys, which nothing imported yet) is not imported; the user's own module there is."""
    from dualdl.testing.cli_parity import load_factory
    if "colorsys" in sys.modules:
        pytest.skip("colorsys already imported in this process")
    marker = tmp_path / "MARK"
    (tmp_path / "colorsys.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    mod = _user_module(tmp_path, monkeypatch, "import colorsys\n\ndef make():\n    return colorsys.rgb_to_hsv\n",
                       name="mine_beside_colorsys")
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)       # as `python -m dualdl` has it
    try:
        f = load_factory(f"{mod}:make")
        assert f()(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0) and not marker.exists()
        assert sys.path[-1] == os.path.realpath(tmp_path) and str(tmp_path) not in sys.path[:-1]
        assert sys.modules["colorsys"].__file__ != str(tmp_path / "colorsys.py")
    finally:
        sys.modules.pop("colorsys", None)
        sys.modules.pop(mod, None)


def test_translate_an_exported_symbol_file(tmp_path, monkeypatch, capsys):
    """`dualdl translate X-symbol.json --params X-0000.params` goes to translate_symbol_file; a
    missing --params or shapes that do not fit the exported graph exit 2 with one line."""
    from mxnet import gluon
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, in_units=4, activation="relu"), gluon.nn.Dense(3, in_units=5))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 4)))
    net.export(str(tmp_path / "small"))
    monkeypatch.chdir(tmp_path)
    code, _, err = _translate_main(["small-symbol.json", "--input-shape", "2,4", "--out", "o"], capsys)
    assert code == 2 and err == "dualdl translate: small-symbol.json needs its weights: add --params MODEL-0000.params"
    code, _, err = _translate_main(["small-symbol.json", "--params", "small-0000.params", "--input-shape", "2,4,4",
                                    "--out", "o"], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "do not fit" in err and "(small-symbol.json)" in err, err
    code, out, _ = _translate_main(["small-symbol.json", "--params", "small-0000.params", "--input-shape", "2,4",
                                    "--out", "o"], capsys)
    assert code == 0 and "translate small: OK" in out, out
    assert sorted(os.listdir(tmp_path / "o")) == ["small.py", "small.report.json", "small.safetensors"]
    import json
    assert json.loads((tmp_path / "o" / "small.report.json").read_text())["ok"] is True
    (tmp_path / "o" / "small.report.json").unlink()     # its own .py and weights are still recognised
    code, out, err = _translate_main(["small-symbol.json", "--params", "small-0000.params", "--input-shape", "2,4",
                                      "--out", "o"], capsys)
    assert code == 0 and "translate small: OK" in out, err


def test_factory_from_a_script_whose_arguments_all_have_defaults(tmp_path, monkeypatch, capsys):
    """apache/mxnet's example/gluon/mnist/mnist.py style: argparse at module level, every option
    with a default. Imported with sys.argv = [its file] it parses no option (before, it saw
    dualdl's own arguments and exited with 'unrecognized arguments'), and the factory translates."""
    script = ("import argparse\nparser = argparse.ArgumentParser()\n"
              "parser.add_argument('--units', type=int, default=3)\nopt = parser.parse_args()\n\n" + SMALL +
              "\n\ndef from_opt():\n    return Small(opt.units)\n")
    mod = _user_module(tmp_path, monkeypatch, script, name="mnist_like_script")
    code, out, err = _translate_main([f"{mod}:from_opt", "--input-shape", "2,4", "--out", "o"], capsys)
    assert code == 0 and "translate from_opt: OK" in out, err


def test_batchnorm_option_reaches_the_generated_module(tmp_path, monkeypatch, capsys):
    text = ("from mxnet import gluon\n\n\nclass WithBN(gluon.HybridBlock):\n    def __init__(self):\n"
            "        super().__init__()\n        self.dense = gluon.nn.Dense(3, in_units=4)\n"
            "        self.bn = gluon.nn.BatchNorm(in_channels=3)\n\n    def hybrid_forward(self, F, x):\n"
            "        return self.bn(self.dense(x))\n\n\ndef make():\n    return WithBN()\n")
    mod = _user_module(tmp_path, monkeypatch, text, name="with_bn_mod")
    for choice, expect in (("torch", "nn.BatchNorm1d(3"), ("gluon", "GluonBatchNorm1d(3")):
        code, out, err = _translate_main([f"{mod}:make", "--input-shape", "4,4", "--out", choice,
                                          "--batchnorm", choice], capsys)
        assert code == 0 and "OK" in out, err
        assert f"self.bn = {expect}" in (tmp_path / choice / "make.py").read_text()   # named from the factory


def test_inference_option_translates_a_forward_with_a_loss_when_recording(tmp_path, monkeypatch, capsys):
    """gluoncv's detectors compute their loss inside autograd.record(): refused in one line (exit 1)
    with what to do; --inference translates and proves the inference forward."""
    text = ("from mxnet import autograd, gluon\n\n\nclass Det(gluon.HybridBlock):\n    def __init__(self):\n"
            "        super().__init__()\n        self.dense = gluon.nn.Dense(3, in_units=4)\n\n"
            "    def hybrid_forward(self, F, x):\n        y = self.dense(x)\n"
            "        if autograd.is_training() and autograd.is_recording():\n            return (y * y).sum()\n"
            "        return y\n\n\ndef make():\n    return Det()\n")
    mod = _user_module(tmp_path, monkeypatch, text, name="det_mod")
    code, out, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "a"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "autograd.is_recording()" in err and "--inference" in err, err
    code, out, err = _translate_main([f"{mod}:make", "--input-shape", "2,4", "--out", "b", "--inference"], capsys)
    assert code == 0 and "translate make: OK" in out and "translated for inference" in out, (out, err)
    assert "call .eval() before calling it" in (tmp_path / "b" / "make.py").read_text()


def test_a_generated_file_edited_since_is_kept(tmp_path, monkeypatch, capsys):
    """The report records the hashes of the source and weights it describes: a forward written by
    hand into the generated .py, or weights trained and saved over the generated ones, are not
    replaced by the next run without --force."""
    mod = _user_module(tmp_path, monkeypatch)
    args = [f"{mod}:make", "--input-shape", "2,4", "--out", "o", "--name", "small"]
    assert _translate_main(args, capsys)[0] == 0
    py, st = tmp_path / "o" / "small.py", tmp_path / "o" / "small.safetensors"
    py.write_text(py.read_text() + "\n# my own change\n")
    code, _, err = _translate_main(args, capsys)
    assert code == 2 and err == ("dualdl translate: o/small.py exists and was changed since dualdl translate wrote it "
                                 "(its content no longer matches the hash translate wrote in it); pass --force "
                                 "(force=True) to overwrite it, or choose another --out/--name"), err
    assert py.read_text().endswith("# my own change\n")
    py.write_text(py.read_text()[:-len("\n# my own change\n")])        # undone: translate's own file again
    import torch
    from safetensors.torch import load_file, save_file
    trained = {k: v + 1 for k, v in load_file(str(st)).items()}
    save_file(trained, str(st), metadata={"generated_by": "dualdl translate"})   # even with the metadata
    code, _, err = _translate_main(args, capsys)
    assert code == 2 and "o/small.safetensors exists and was changed since" in err, err
    assert torch.equal(load_file(str(st))["dense.weight"], trained["dense.weight"])
    code, out, _ = _translate_main(args + ["--force"], capsys)
    assert code == 0 and "translate small: OK" in out


def test_a_module_api_symbol_is_translated_up_to_the_output_named(tmp_path, monkeypatch, capsys):
    """A Module-API checkpoint ends in SoftmaxOutput (a training head): the CLI says which
    --output to give, and with it translates the graph before the head."""
    data = mx.sym.var("data")
    fc2 = mx.sym.FullyConnected(mx.sym.relu(mx.sym.FullyConnected(data, num_hidden=5, name="fc1")), num_hidden=3,
                                name="fc2")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(fc2, name="softmax"), data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", (2, 4))], label_shapes=[("softmax_label", (2,))])
    mod.init_params()
    mod.save_checkpoint(str(tmp_path / "modapi"), 0)
    monkeypatch.chdir(tmp_path)
    args = ["modapi-symbol.json", "--params", "modapi-0000.params", "--input-shape", "2,4", "--out", "o"]
    code, _, err = _translate_main(args, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "translate the graph before it with --output fc2_output" in err
    code, out, err = _translate_main(args + ["--output", "fc2_output", "--input-name", "data"], capsys)
    assert code == 0 and "translate modapi: OK" in out, err
    code, _, err = _translate_main(["m:f", "--input-shape", "2,4", "--out", "o", "--output", "x"], capsys)
    assert code == 2 and "--input-name and --output are for an exported SYMBOL.json" in err
