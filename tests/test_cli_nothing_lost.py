"""``dualdl translate`` loses nothing and answers bad input in one line (issues 41, 42): output
names per model, the hash of each generated file inside the file, special files refused without
blocking, per-input sample ranges, and the attack inputs that used to end in tracebacks."""
import json
import os
import signal
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from dualdl.cli import main  # noqa: E402

MODELS = '''from mxnet import gluon


class Net(gluon.HybridBlock):
    def __init__(self, units=3):
        super().__init__()
        self.dense = gluon.nn.Dense(units, in_units=4)

    def hybrid_forward(self, F, x):
        return F.relu(self.dense(x))


def net3():
    return Net(3)


def net5():
    return Net(5)


def pretrained():
    n = Net(3)
    n.initialize()
    return n


class Ids(gluon.HybridBlock):
    """Token ids and token types: two embeddings of 7 and 2 rows."""
    def __init__(self):
        super().__init__()
        self.word = gluon.nn.Embedding(7, 3)
        self.kind = gluon.nn.Embedding(2, 3)

    def hybrid_forward(self, F, ids, kinds):
        return self.word(ids) + self.kind(kinds)


def ids():
    return Ids()
'''


@pytest.fixture
def models(tmp_path, monkeypatch):
    name = "lost_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)
    (tmp_path / f"{name}.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


@pytest.fixture
def no_hang():
    """A call that blocks (opening a FIFO, reading /dev/zero) fails the test after 20 s instead of hanging."""
    def alarm(*_):
        raise TimeoutError("blocked on a special file")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


def _one_line(code, err, want=2):
    assert code == want and len(err.splitlines()) == 1 and "Traceback" not in err, (code, err)


def test_two_models_of_one_class_keep_their_own_files(tmp_path, models, capsys):
    """Named from the factory (net3, net5), not from the shared class; under one --name the second
    model is refused (its files belong to the first) unless --force."""
    for f in ("net3", "net5"):
        assert _run(["translate", f"{models}:{f}", "--input-shape", "2,4", "--out", "o"], capsys)[0] == 0
    assert sorted(os.listdir(tmp_path / "o")) == [f"net{n}{s}" for n in (3, 5)
                                                  for s in (".py", ".report.json", ".safetensors")]
    first = {p: (tmp_path / "o" / p).read_bytes() for p in os.listdir(tmp_path / "o")}
    code, _, err = _run(["translate", f"{models}:net3", "--input-shape", "2,4", "--out", "o", "--name", "net5"],
                        capsys)
    _one_line(code, err)
    assert err == ("dualdl translate: o/net5.py holds the translation of another model (Net with 2 tensors; this one "
                   "has 2); pass --name NAME (name=...) to keep both, or --force (force=True) to replace it"), err
    assert {p: (tmp_path / "o" / p).read_bytes() for p in os.listdir(tmp_path / "o")} == first
    assert _run(["translate", f"{models}:net3", "--input-shape", "2,4", "--out", "o", "--name", "net5", "--force"],
                capsys)[0] == 0
    assert json.loads((tmp_path / "o" / "net5.report.json").read_text())["mapping"][0]["shape"] == [3, 4]


def test_the_api_refuses_another_models_files_under_the_default_name(tmp_path):
    """translate(block) names the files from the class (net): a second, different Net is refused
    instead of silently replacing the first's output; the same model again replaces its own."""
    from dualdl import port
    from mxnet import gluon
    blocks = []
    for units in (3, 5, 3):
        b = gluon.nn.Dense(units, in_units=4)
        b.initialize()
        blocks.append(b)
    x = np.ones((2, 4), np.float32)
    assert port.translate(blocks[0], x, str(tmp_path)).ok
    with pytest.raises(FileExistsError, match="holds the translation of another model"):
        port.translate(blocks[1], x, str(tmp_path))
    assert port.translate(blocks[2], x, str(tmp_path)).ok          # same architecture: its own output


def test_an_edited_generated_file_is_kept_without_its_report(tmp_path, models, capsys):
    """The hash lives in the generated file's first line: the edit is found with no report beside it."""
    args = ["translate", f"{models}:net3", "--input-shape", "2,4", "--out", "o"]
    assert _run(args, capsys)[0] == 0
    py = tmp_path / "o" / "net3.py"
    first = py.read_text().splitlines()[0]
    assert first.startswith("# dualdl translate sha256=") and " model=" in first
    py.write_text(py.read_text().replace("return", "return  # mine", 1))
    (tmp_path / "o" / "net3.report.json").unlink()
    code, _, err = _run(args, capsys)
    _one_line(code, err)
    assert "o/net3.py exists and was changed since dualdl translate wrote it" in err and "--force" in err
    assert "# mine" in py.read_text()


@pytest.mark.parametrize("what", ["fifo.py", "fifo.report.json", "zero.safetensors", "deep.report.json"])
def test_special_files_in_the_way_are_refused_without_blocking(tmp_path, models, capsys, no_hang, what):
    out = tmp_path / "o"
    out.mkdir()
    kind, suffix = what.split(".", 1)
    target = out / f"net3.{suffix}"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "zero":        # a link to /dev/zero beside a report: never read
        assert _run(["translate", f"{models}:net3", "--input-shape", "2,4", "--out", "o"], capsys)[0] == 0
        target.unlink()
        os.symlink("/dev/zero", target)
    else:                       # a report nested 200,000 deep
        target.write_text("[" * 200_000 + "]" * 200_000)
    code, _, err = _run(["translate", f"{models}:net3", "--input-shape", "2,4", "--out", "o"], capsys)
    _one_line(code, err)
    says = {"fifo": "is a FIFO (named pipe), not a file translate wrote; remove it",
            "zero": "is a symbolic link to a character device (/dev/zero)",
            "deep": "net3.report.json exists and was not written by dualdl translate"}[kind]
    assert says in err, err


def test_convert_attack_inputs_are_one_line(tmp_path, capsys, no_hang):
    mx.nd.save(str(tmp_path / "a.params"), {"w": mx.nd.ones((2, 3))})
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (tmp_path / "part.json").write_text(json.dumps({"format": "dualdl-port-mapping", "entries": [
        {"target": "w", "shape": [2, 3], "dtype": "float32", "sources": [{"key": "w", "part": [0, 0, 0]}]}]}))
    src, dst = str(tmp_path / "a.params"), str(tmp_path / "b.pt")
    for mapping, says in (("/dev/zero", "--mapping /dev/zero is not a regular file"),
                          (str(tmp_path / "deep.json"), "is nested too deeply"),
                          (str(tmp_path / "part.json"), "part [0, 0, 0]")):    # named by the mapping's loader
        code, _, err = _run(["convert", src, dst, "--mapping", mapping], capsys)
        _one_line(code, err)
        assert says in err, err
    code, _, err = _run(["convert", "/dev/zero", dst], capsys)
    _one_line(code, err)
    assert "the source /dev/zero is not a regular file" in err
    assert not os.path.exists(dst)


@pytest.mark.parametrize("argv, says", [
    (["--input-shape", "2,99999999999"], "has 2e+11 values; a sample input may have at most 134,217,728"),
    (["--input-shape", "2,4", "--input-dtype", "int64"], "--input-dtype float32 for input 0, one value per input"),
    (["--input-shape", "2,4", "--input-dtype", "int32"], "--input-dtype must be float32 or int64, got 'int32'"),
    (["--input-shape", "2,4", "--input-high", "3,4"], "--input-high takes one value for all inputs or one per input "
                                                      "(1 inputs), got 2: 3,4"),
    (["--input-shape", "2,4", "--sample", "x.npz"], "--sample x.npz does not exist"),
])
def test_bad_sample_inputs_are_one_line(models, capsys, argv, says):
    code, _, err = _run(["translate", f"{models}:net3", "--out", "o", *argv], capsys)
    _one_line(code, err)
    assert says in err, err
    assert "this is a bug" not in err


def test_per_input_ranges_and_sample_files(tmp_path, models, capsys):
    """Token ids and token types need different ranges: one --input-high for both is the user's
    error, named with the embedding and the flag; one per input (comma-separated or repeated),
    or the inputs themselves in --sample, translate and prove."""
    base = ["translate", f"{models}:ids", "--input-shape", "2,5", "--input-shape", "2,5", "--input-dtype", "int64"]
    code, _, err = _run(base + ["--input-high", "7", "--out", "a"], capsys)
    _one_line(code, err)
    assert err.startswith("dualdl translate: input 1 has values up to 6 but the embedding kind has 2 rows; "
                          "MXNet reads out of bounds there"), err
    assert "pass --input-high" in err and "this is a bug" not in err and "register_translation" not in err
    for highs in (["--input-high", "7,2"], ["--input-high", "7", "--input-high", "2"]):
        code, out, err = _run(base + highs + ["--out", "b", "--progress"], capsys)
        assert code == 0 and "translate ids: OK" in out, err
        assert "tracing the model on inputs int64[2, 5], int64[2, 5]" in err
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "s.npz", rng.integers(0, 7, (3, 4)), rng.integers(0, 2, (3, 4)))
    code, out, err = _run(["translate", f"{models}:ids", "--sample", "s.npz", "--out", "c"], capsys)
    assert code == 0 and "translate ids: OK" in out, err
    code, _, err = _run(["translate", f"{models}:ids", "--sample", "s.npz", "--input-high", "3", "--out", "c"], capsys)
    _one_line(code, err)
    assert "--sample gives the inputs themselves" in err


def test_parameters_the_factory_initialised_give_no_warning_flood(models, capsys, recwarn):
    code, _, err = _run(["translate", f"{models}:pretrained", "--input-shape", "2,4", "--out", "o", "--progress"],
                        capsys)
    assert code == 0, err
    assert not [w for w in recwarn if "already initialized" in str(w.message)]
    assert "2 parameters were already initialised by the factory: kept as they are" in err


@pytest.mark.slow   # a fresh interpreter importing mxnet, gluoncv and torch (~15 s)
def test_a_gluoncv_factory_from_the_command_line_beside_a_cv2_py(tmp_path):
    """gluoncv refuses torch >= 2 when imported plainly ("Legacy torch==... detected"); the CLI
    imports it through dualdl.port.import_gluoncv(). A ./cv2.py in the current folder (opencv is
    optional for gluoncv and mxnet) is never imported for an installed package's factory."""
    import subprocess
    (tmp_path / "cv2.py").write_text(f"open({str(tmp_path / 'MARK')!r}, 'w').write('ran')\n")
    proc = subprocess.run([sys.executable, "-m", "dualdl", "translate", "gluoncv.model_zoo:cifar_resnet20_v1",
                           "--input-shape", "1,3,32,32", "--out", "o", "--no-verify"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "translate cifar_resnet20_v1: NOT VERIFIED" in proc.stdout
    assert not (tmp_path / "MARK").exists()


def test_outputs_never_replace_a_special_file(tmp_path, models, capsys, no_hang):
    """A FIFO (as /dev/full would be) named as convert's destination or parity's --json is refused:
    renaming a finished file over it replaced the node itself (as root, /dev/full became a file)."""
    import stat
    fifo = tmp_path / "pipe.pt"
    os.mkfifo(fifo)
    mx.nd.save(str(tmp_path / "a.params"), {"w": mx.nd.ones((2, 3))})
    code, _, err = _run(["convert", "a.params", "pipe.pt"], capsys)
    _one_line(code, err)
    assert "pipe.pt is not a regular file" in err
    code, _, err = _run(["parity", f"{models}:net3", "--input-shape", "2,4", "--json", "pipe.pt"], capsys)
    _one_line(code, err)
    assert err == "dualdl parity: --json pipe.pt is not a regular file; give a file to write the report to"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_an_exported_symbol_file_that_is_special_or_too_deep_is_one_line(tmp_path, capsys, no_hang):
    mx.nd.save(str(tmp_path / "m-0000.params"), {})
    (tmp_path / "deep-symbol.json").write_text('{"nodes": ' + "[" * 200_000 + "]" * 200_000 + "}")
    os.mkfifo(tmp_path / "fifo-symbol.json")
    for sym, says in (("deep-symbol.json", "the symbol file nests its JSON too deeply to be an MXNet symbol"),
                      ("fifo-symbol.json", "fifo-symbol.json is not a regular file")):
        code, _, err = _run(["translate", str(tmp_path / sym), "--params", str(tmp_path / "m-0000.params"),
                             "--input-shape", "1,3", "--out", str(tmp_path / "o")], capsys)
        _one_line(code, err)
        assert says in err, err


def test_an_exported_model_takes_per_input_samples(tmp_path, models, capsys):
    """The exported graph's proof: ids beyond an Embedding are the user's error (exit 2, the flag named),
    per-input --input-high or --sample translate it."""
    ns = {}
    exec(MODELS, ns)
    net = ns["Ids"]()
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 5)), mx.nd.ones((2, 5)))
    net.export(str(tmp_path / "ids"))
    base = ["translate", "ids-symbol.json", "--params", "ids-0000.params", "--input-shape", "2,5", "--input-shape",
            "2,5", "--input-dtype", "int64"]
    code, _, err = _run(base + ["--input-high", "7", "--out", "a"], capsys)
    _one_line(code, err)
    assert err.startswith("dualdl translate: input 1 (data1) has values up to 6 but the embedding "), err
    assert "has 2 rows; torch refuses them: pass --input-high with one value per input" in err, err
    code, out, err = _run(base + ["--input-high", "7,2", "--out", "b"], capsys)
    assert code == 0 and "translate ids: OK" in out, err


BERT = '''import mxnet as mx
from gluonnlp.model.bert import BERTEncoder, BERTModel


def make():
    enc = BERTEncoder(num_layers=2, units=32, hidden_size=64, max_length=64, num_heads=4, dropout=0.0,
                      output_attention=False, output_all_encodings=False)
    net = BERTModel(enc, vocab_size=100, token_type_vocab_size=2, units=32, embed_size=32, use_pooler=True,
                    use_decoder=False, use_classifier=False)
    net.initialize(mx.init.Normal(0.02))
    return net
'''


@pytest.mark.slow   # a fresh interpreter (an out-of-bounds id used to abort the process) with gluonnlp: ~12 s
def test_gluonnlp_bert_token_ids_types_and_lengths_each_get_their_range(tmp_path):
    """gluonnlp's BERTModel(inputs, token_types, valid_length): one --input-high 100 for all three fed
    token types up to 99 to a 2-row embedding, which MXNet's CPU kernel reads out of bounds
    ("malloc(): corrupted top size", the process aborted); now one line naming the input, the
    embedding and the flag; --input-high 100,2,17 translates and proves it."""
    import subprocess
    (tmp_path / "bert_small.py").write_text(BERT)
    base = [sys.executable, "-m", "dualdl", "translate", "bert_small:make", "--input-shape", "2,16", "--input-shape",
            "2,16", "--input-shape", "2", "--input-dtype", "int64", "--out", "o"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    one = subprocess.run(base + ["--input-high", "100"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=env)
    assert one.returncode == 2 and one.stderr.strip().startswith(
        "dualdl translate: input 1 has values up to 9"), one.stderr[-2000:]
    assert "but the embedding token_type_embed.0 has 2 rows" in one.stderr and "--input-high" in one.stderr
    each = subprocess.run(base + ["--input-high", "100,2,17"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert each.returncode == 0 and "translate make: OK" in each.stdout, each.stderr[-2000:]
    assert "already initialized" not in each.stderr
