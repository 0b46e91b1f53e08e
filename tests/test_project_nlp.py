"""Issue 42 on gluonnlp's BERT fine-tuning loop (tests/scripts/gluon_bert_finetune.py, in the style
of gluonnlp v0.10's scripts/bert/finetune_classifier.py): ``dualdl convert-project`` converts it
with no TODO - ``nlp.model.get_model`` becomes the translator's torch module (written at conversion
time, proven in float64, under Gluon's save_parameters names), the tokenizer, vocabulary, bucket
sampler and batchify torch-only twins measured equal to gluonnlp's - and the converted run is
proven update by update against the Gluon run (batches exactly; lr; loss, gradients after
gluonnlp's global-norm clipping, the norm before it, and weights against the converted script's
float64 run, as check_native_training's float64 reference: MXNet runs BERT's attention in
float32 only)."""
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("libcst")
mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
nlp = pytest.importorskip("gluonnlp")

from dualdl.port.project import convert_project  # noqa: E402
from dualdl.port.project.api import check_torch_only  # noqa: E402
from dualdl.port.project import torch_runtime_nlp as R  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
SCRIPT = "gluon_bert_finetune.py"
TINY = dict(num_layers=2, units=32, hidden_size=64, num_heads=2, max_length=64, embed_size=32,
            dropout=0.0)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    src = tmp_path_factory.mktemp("bert_src")
    shutil.copy(os.path.join(SCRIPTS, SCRIPT), src / SCRIPT)
    out = tmp_path_factory.mktemp("bert_torch")
    return convert_project(str(src), str(out), force=True), src, out


def test_the_text_pipeline_is_gluonnlps():
    """Vocabulary order, BERT tokenizer, sentence transform and GLUE helpers, against gluonnlp."""
    from gluonnlp.data.bert.glue import concat_sequences, truncate_seqs_equal
    words = "the dog is hairy jack ##son ##ville ? no it not . gl ##uo ##nn ##lp : nl ##p a".split()
    gv = nlp.vocab.BERTVocab(nlp.data.count_tokens(words * 2 + ["dog"]))
    tv = R.BERTVocab(R.count_tokens(words * 2 + ["dog"]))
    assert tv.idx_to_token == gv.idx_to_token                   # [UNK] [CLS] [SEP] [MASK] [PAD] ...
    assert R.Vocab(R.count_tokens(words)).idx_to_token == nlp.Vocab(
        nlp.data.count_tokens(words)).idx_to_token
    gt, tt = nlp.data.BERTTokenizer(gv, lower=True), R.BERTTokenizer(tv, lower=True)
    for text in ("Is this Jacksonville?", "gluonnlp: 使NLP变得简单。", "Éa\x00b café", "dogs the",
                 " \tHeLLo!how  \n Are yoU? "):
        assert tt(text) == gt(text), text
    for pair in (True, False):
        for pad in (True, False):
            g = nlp.data.BERTSentenceTransform(gt, 8, pad=pad, pair=pair)
            t = R.BERTSentenceTransform(tt, 8, pad=pad, pair=pair)
            for line in (("is this jacksonville ?", "no it is not ."), ("a a a a a a a a a", "b")):
                line = line if pair else line[:1]
                for x, y in zip(g(line), t(line)):
                    assert np.array_equal(x, y) and x.dtype == y.dtype
    rng = np.random.default_rng(0)
    for _ in range(100):
        seqs = [list(range(int(rng.integers(0, 12)))) for _ in range(int(rng.integers(1, 4)))]
        m = int(rng.integers(0, 30))
        assert R.truncate_seqs_equal([list(s) for s in seqs], m) == truncate_seqs_equal(
            [list(s) for s in seqs], m)
        seps = [["[SEP]"]] * len(seqs) + [["[CLS]"]]
        assert R.concat_sequences(seqs, seps) == concat_sequences(seqs, seps)


def test_the_script_converts_with_no_todo_and_get_model_is_translated(project):
    report, _, out = project
    f = next(f for f in report.files if f["path"] == SCRIPT)
    assert f["todo_lines"] == 0 and f["converted"] == f["api_lines"] >= 35
    src = (out / SCRIPT).read_text()
    for line in ("bert, vocabulary = g2t.zoo('gluonnlp.model.get_model')('bert_12_768_12', "
                 "dataset_name=None, vocab=vocab,",
                 "model = g2t.BERTClassifier(bert, dropout=0.0, num_classes=2)",
                 "tokenizer = g2t.BERTTokenizer(vocab, lower=True)",
                 "batch_sampler = g2t.GluonFixedBucketSampler(data_train_len, "
                 "batch_size=args.batch_size,",
                 "    g2t.GluonPad(axis=0, pad_val=pad_val),  # input",
                 "                g2t.nlp_clip_grad_global_norm(params, args.max_norm)"):
        assert line in src, line
    check_torch_only(src, forbidden_only=True)
    check_torch_only((out / "gluon2torch.py").read_text())
    model, = report.models
    assert model["factory"] == "gluonnlp.model.get_model" and "todo" not in model
    assert model["kwargs"]["num_layers"] == 2 and "vocab" not in model["kwargs"]
    mod = (out / "dualdl_models" / (model["module"] + ".py")).read_text()
    check_torch_only(mod)
    assert "class DotProductSelfAttentionCell(nn.Module):" in mod
    # Gluon's save_parameters names, also where gluonnlp overrides _collect_params_with_prefix
    assert model["rename"]["encoder.transformer_cells.0.attention_cell.query_bias"] == \
        "encoder.transformer_cells.0.attention_cell.proj_query.bias"


def test_the_converted_run_is_proven_update_by_update(project, tmp_path):
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_data
    _, src, out = project
    write_data("tsv", str(tmp_path))
    max_norm = 0.002                    # clip_grad_global_norm active at every update
    proof = prove_scripts(str(src / SCRIPT), str(out / SCRIPT), str(tmp_path), steps=6,
                          args=["--max_norm", str(max_norm)])
    assert proof.passed, proof.summary()
    assert proof.evidence == "float64 run of the converted script" and proof.usage < 1.0
    assert proof.max_diff["batch"] == 0.0 and proof.max_diff["lr"] == 0.0
    assert proof.max_diff["grad"] < 1e-5 and proof.max_diff["loss"] < 1e-5
    assert not [m for m in proof.torch_modules if m in ("mxnet", "gluonnlp", "dualdl")]
    g = np.load(tmp_path / "gluon_run.npz")
    lrs = [float(g[f"{s}/lr"]) for s in range(6)]
    assert lrs[0] == 0.0 and lrs[1] > 0 and max(lrs) == lrs[4]        # warmup, then decay
    assert proof.max_diff["clipnorm"] < 1e-5          # the gradients' norm before clipping
    for s in range(6):                  # the update's gradient is the clipped sum / accumulate
        assert float(g[f"{s}/clipnorm"]) > 2 * max_norm
        grads = [g[k] for k in g.files if k.startswith(f"{s}/grad/")]
        assert len(grads) == 41
        norm = 2 * np.sqrt(sum(float((x.astype(np.float64) ** 2).sum()) for x in grads))
        assert abs(norm - max_norm) < 1e-5 * max_norm
    # LayerNorm and bias terms have no weight decay (wd_mult = 0 set after the Trainer)
    t = np.load(tmp_path / "torch_run.npz")
    assert "4/param/bert.encoder.transformer_cells.0.attention_cell.proj_query.bias" in t.files


@pytest.mark.slow
def test_a_wrong_conversion_fails_the_proof(project, tmp_path):
    """Control: the converted script with weight decay on LayerNorm and biases (wd_mult 1 where
    the script sets 0) fails at update 1 on a LayerNorm gamma (~10x its allowance; lr 5e-3, the
    correct conversion 0.27x), not as rounding."""
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_data
    _, src, out = project
    wrong = tmp_path / "wrong"
    shutil.copytree(out, wrong)
    text = (wrong / SCRIPT).read_text()
    assert text.count("        v.wd_mult = 0.0") == 1
    (wrong / SCRIPT).write_text(text.replace("        v.wd_mult = 0.0", "        v.wd_mult = 1.0"))
    write_data("tsv", str(tmp_path))
    proof = prove_scripts(str(src / SCRIPT), str(wrong / SCRIPT), str(tmp_path), steps=4,
                          args=["--max_norm", "0.002", "--lr", "5e-3"])
    assert not proof.passed and proof.usage > 4
    assert proof.first_failure.startswith("update 1: param/") and ".gamma" in proof.first_failure


def test_what_cannot_convert_is_named(tmp_path):
    from dualdl.port.project.zoo import write_models
    text = ("import gluonnlp as nlp\n"
            "params = {'name': 'bert_12_768_12', 'dataset_name': 'book_corpus_wiki_en_uncased'}\n"
            "bert, vocab = nlp.model.get_model(**params)\n")
    todo, = write_models({"train.py": text}, str(tmp_path))
    assert todo["line"] == 3 and "--zoo" in todo["todo"]
    with pytest.raises(ValueError, match="pretrained weights .* `dualdl convert`"):
        R.nlp_zoo_result(torch.nn.Module(), {}, ("bert_12_768_12",), {"vocab": None})
    with pytest.raises(ValueError, match="vocabulary download"):
        R.nlp_zoo_result(torch.nn.Module(), {}, ("bert_12_768_12",), {"pretrained": False})


def test_glue_vocabulary_and_checkpoint_files_read_as_gluonnlp_reads_them(tmp_path, monkeypatch):
    """The synthetic MRPC the proof writes, read by the torch twins and by gluonnlp: the same
    rows, the same cached vocabulary, the same bert.params arrays (numpy reader)."""
    import json
    from dualdl.port.project.data_nlp import OVERRIDE, write_glue_mrpc
    monkeypatch.setenv(OVERRIDE, json.dumps({"bert_12_768_12": TINY}))     # bert.params: tiny
    write_glue_mrpc(str(tmp_path), train=6, dev=3, test=2)
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    task = R.get_task("MRPC")
    assert task.class_labels == ["0", "1"] and task.is_pair
    assert [type(m).__name__ for m in task.metrics.metrics] == ["Accuracy", "F1"]
    for segment, fields in (("train", [3, 4, 0]), ("test", [3, 4])):
        theirs = nlp.data.TSVDataset(str(tmp_path / "datasets" / "glue_mrpc" / f"{segment}.tsv"),
                                     num_discard_samples=1, field_indices=fields)
        ours = task.get_dataset(segment)
        assert len(ours) == len(theirs) and all(list(ours[i]) == list(theirs[i])
                                                for i in range(len(ours)))
    vocab = R.cached_vocab("book_corpus_wiki_en_uncased")
    path = next((tmp_path / "models").glob("*.vocab"))
    gv = nlp.vocab.BERTVocab.from_json(path.read_text())
    assert vocab.idx_to_token == gv.idx_to_token and vocab.cls_token == gv.cls_token
    arrays = R.read_gluon_params(str(tmp_path / "bert.params"))
    want = mx.nd.load(str(tmp_path / "bert.params"))
    assert sorted(arrays) == sorted(want)
    assert all(np.array_equal(arrays[k], want[k].asnumpy()) for k in want)
    assert arrays["encoder.transformer_cells.1.ffn.ffn_1.weight"].shape == (64, 32)
    with pytest.raises(ValueError, match="GLUE task 'RTE' has no torch twin"):
        R.get_task("RTE")
    with pytest.raises(FileNotFoundError, match="vocabulary of 'wiki_cn_cased' is a gluonnlp"):
        R.cached_vocab("wiki_cn_cased")


def test_a_glue_script_with_a_run_time_architecture_is_proven(tmp_path, monkeypatch):
    """finetune_classifier.py's GLUE path (tests/scripts/gluon_bert_glue.py): get_task('MRPC'),
    get_model(**params) named by --zoo, the dataset's cached vocabulary, .params weights through
    nlp.utils.load_parameters, BERTClassifier(dropout=0.1) - shrunk and dropout-free on both sides
    by DUALDL_ZOO_OVERRIDE - converted with no TODO and proven over 4 updates."""
    import json
    from dualdl.port.project.data_nlp import OVERRIDE
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_data
    monkeypatch.setenv(OVERRIDE, json.dumps({"bert_12_768_12": TINY,
                                             "BERTClassifier": {"dropout": 0.0}}))
    name = "gluon_bert_glue.py"
    src, out, work = tmp_path / "src", tmp_path / "out", tmp_path / "work"
    src.mkdir()
    shutil.copy(os.path.join(SCRIPTS, name), src / name)
    report = convert_project(str(src), str(out), zoo=[
        ":name=bert_12_768_12,use_decoder=False,use_classifier=False,use_pooler=True"])
    f, = report.files
    assert f["todo_lines"] == 0 and f["converted"] == f["api_lines"]
    model, = report.models
    assert model["args"] == [] and model["kwargs"]["name"] == "bert_12_768_12"
    write_data("glue_mrpc,train=24,dev=8", str(work))
    proof = prove_scripts(str(src / name), str(out / name), str(work), steps=4,
                          args=["--pretrained_bert_parameters", "bert.params"])
    assert proof.passed, proof.summary()
    assert proof.max_diff["batch"] == 0.0 and proof.usage < 1.0


def test_roberta_classifier_over_the_translated_encoder_is_gluonnlps(tmp_path):
    """RoBERTaClassifier's torch twin over the zoo's translation of get_model('roberta_12_768_12')
    (tiny), with Gluon's weights by Gluon's names: the same scores as gluonnlp's."""
    import importlib.util
    import json
    from dualdl.port.project.torch_runtime_vision import gluon_names
    from dualdl.port.project.zoo import write_models
    kw = ", ".join(f"{k}={v!r}" for k, v in TINY.items())
    text = ("import gluonnlp as nlp\nm, v = nlp.model.get_model('roberta_12_768_12', vocab=v, "
            f"use_decoder=False, hparam_allow_override=True, {kw})\n")
    entry, = write_models({"s.py": text}, str(tmp_path))
    vocab = nlp.vocab.BERTVocab(nlp.data.count_tokens([f"w{i}" for i in range(30)]))
    mx.random.seed(0)
    roberta, _ = nlp.model.get_model("roberta_12_768_12", dataset_name=None, vocab=vocab,
                                     pretrained=False, use_decoder=False,
                                     hparam_allow_override=True, **TINY)
    gnet = nlp.model.RoBERTaClassifier(roberta, num_classes=3, dropout=0.1)
    gnet.initialize(mx.init.Normal(0.05))
    ids = np.random.default_rng(1).integers(0, len(vocab), (3, 7)).astype(np.float32)
    length = np.array([7, 4, 2], np.float32)
    want = gnet(mx.nd.array(ids), mx.nd.array(length)).asnumpy()
    spec = importlib.util.spec_from_file_location(
        "zoo_roberta", str(tmp_path / "dualdl_models" / (entry["module"] + ".py")))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    enc = getattr(mod, entry["class"])()
    gluon_names(enc, entry["rename"])
    enc, _ = R.nlp_zoo_result(enc, entry["extra"], ("roberta_12_768_12",),
                              {"vocab": vocab, "pretrained": False})
    tnet = R.RoBERTaClassifier(enc, num_classes=3, dropout=0.1).eval()
    with torch.no_grad():
        tnet(torch.from_numpy(ids), torch.from_numpy(length))         # the lazy head's shapes
    params = {k: torch.from_numpy(p.data().asnumpy())
              for k, p in gnet._collect_params_with_prefix().items()}
    tnet.load_state_dict(params, strict=True)
    with torch.no_grad():
        got = tnet(torch.from_numpy(ids), torch.from_numpy(length)).numpy()
    assert got.shape == (3, 3) and np.abs(got - want).max() < 1e-5
    assert json.dumps(entry["extra"]) == '{"vocab_size": 29}'
