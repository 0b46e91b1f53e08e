"""translate_recipe(loader=<gluon DataLoader with gluonnlp's FixedBucketSampler + batchify>):
the torch-only sampler and collate function give gluonnlp 0.10's batches exactly: the same indices
per batch in the same order, epoch after epoch, from the same numpy seed (gluonnlp shuffles in
place on numpy's global RNG), for the three bucket schemes, ratio, use_average_length and 2-D
lengths; and the same padded arrays, lengths and dtypes (np.array_equal)."""
import collections
import warnings

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
nlp = pytest.importorskip("gluonnlp")

from dualdl.port.recipe import RecipeError, translate_recipe  # noqa: E402
from dualdl.port.recipe.torch_src import nlp_data as N  # noqa: E402

B = nlp.data.batchify
LENGTHS = np.random.RandomState(0).randint(1, 80, 400).tolist()
SCHEMES = {"const": (nlp.data.ConstWidthBucket(), {}),
           "linear": (nlp.data.LinearWidthBucket(), {}),
           "exp": (nlp.data.ExpWidthBucket(1.3), {"bucket_len_step": 1.3})}
CONFIGS = [dict(batch_size=16), dict(batch_size=16, shuffle=True),
           dict(batch_size=8, num_buckets=5, ratio=0.5, shuffle=True),
           dict(batch_size=300, num_buckets=7, use_average_length=True, shuffle=True),
           dict(batch_size=10, num_buckets=30, shuffle=True)]


def _gluon_sampler(lengths, scheme, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nlp.data.FixedBucketSampler(lengths, bucket_scheme=SCHEMES[scheme][0], **kw)


def _epochs(sampler, seed, n=3):
    np.random.seed(seed)
    return [[[int(i) for i in b] for b in sampler] for _ in range(n)]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_bucket_sampler_batches_equal_gluonnlp(scheme):
    for kw in CONFIGS:
        for lengths in (LENGTHS, [(a, a % 13 + 1) for a in LENGTHS]):
            g = _gluon_sampler(lengths, scheme, **kw)
            t = N.GluonFixedBucketSampler(lengths, bucket_scheme=scheme, **SCHEMES[scheme][1],
                                          **kw)
            assert [tuple(np.atleast_1d(k).tolist()) for k in t._bucket_keys] == \
                [tuple(np.atleast_1d(k).tolist()) for k in g._bucket_keys]
            assert t._bucket_batch_sizes == g._bucket_batch_sizes and len(t) == len(g)
            ours, theirs = _epochs(t, 7), _epochs(g, 7)
            assert ours == theirs, (scheme, kw)
            assert sorted(i for b in ours[0] for i in b) == list(range(len(lengths)))
            if kw.get("shuffle"):
                assert ours[0] != ours[1]  # the epochs really differ


def _samples(n=120):
    rs = np.random.RandomState(1)
    return [(rs.randint(1, 1000, rs.randint(1, 40)).tolist(), rs.randint(0, 2),
             rs.rand(rs.randint(1, 9), 3).astype(np.float32)) for _ in range(n)]


def _same(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for k in theirs:
            _same(ours[k], theirs[k])
    elif isinstance(theirs, mx.nd.NDArray):
        assert isinstance(ours, torch.Tensor)
        b = theirs.asnumpy()
        assert ours.numpy().dtype == b.dtype and np.array_equal(ours.numpy(), b)
    else:
        assert ours == theirs


def test_batchify_equal_gluonnlp():
    data = _samples(9)
    floats = [[0.5, 1.5, 2.5], [3.25]]
    cases = [
        (B.Pad(pad_val=0), N.GluonPad(pad_val=0), [d[0] for d in data]),
        (B.Pad(pad_val=0), N.GluonPad(pad_val=0), floats),  # np.full int64: floats truncated
        (B.Pad(pad_val=-1.5, dtype="float64"), N.GluonPad(pad_val=-1.5, dtype="float64"), floats),
        (B.Pad(axis=0, pad_val=-1, ret_length=True, dtype=np.int32, round_to=8),
         N.GluonPad(pad_val=-1, ret_length=True, dtype="int32", round_to=8), [d[0] for d in data]),
        (B.Pad(axis=0, pad_val=2, ret_length=True), N.GluonPad(pad_val=2, ret_length=True),
         [d[2] for d in data]),
        (B.Pad(axis=1, pad_val=7), N.GluonPad(axis=1, pad_val=7), [d[2].T for d in data]),
        (B.Stack(), N.GluonStack(), [d[1] for d in data]),
        (B.Stack("float32"), N.GluonStack("float32"), [d[1] for d in data]),
        (B.Stack(), N.GluonStack(), [d[2][:1] for d in data]),
        (B.List(), N.GluonList(), [d[0] for d in data]),
        (B.Dict({"a": B.Pad(pad_val=0, dtype="int64"), "b": B.Stack()}),
         N.GluonDict({"a": N.GluonPad(pad_val=0, dtype="int64"), "b": N.GluonStack()}),
         [{"a": d[0], "b": d[1]} for d in data]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for gl, ours, batch in cases:
            _same(ours(batch), gl(batch))


@pytest.mark.parametrize("kw", [dict(num_buckets=6, shuffle=True, ratio=0.3),
                                dict(num_buckets=4, bucket_scheme=nlp.data.ExpWidthBucket(1.2)),
                                dict(num_buckets=5, use_average_length=True, shuffle=True)])
def test_recipe_loader_equals_gluonnlp_loader(kw):
    """A real gluon DataLoader(batch_sampler=FixedBucketSampler, batchify_fn=Tuple(Pad, Stack,
    Pad)) against the written file's make_batch_sampler(lengths) + make_collate(), 2 epochs."""
    data = _samples()
    lengths = [len(d[0]) for d in data]
    batch_size = 200 if kw.get("use_average_length") else 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = nlp.data.FixedBucketSampler(lengths, batch_size, **kw)
        fn = B.Tuple(B.Pad(pad_val=1, ret_length=True, dtype="int32"), B.Stack("float32"),
                     B.Pad(axis=0, pad_val=0.0))
    loader = mx.gluon.data.DataLoader(mx.gluon.data.SimpleDataset(data), batch_sampler=sampler,
                                      batchify_fn=fn)
    recipe = translate_recipe(loader=loader)
    assert "make_collate" in recipe.names and "import mxnet" not in recipe.source
    mod = recipe.load()
    tl = torch.utils.data.DataLoader(data, batch_sampler=mod.make_batch_sampler(lengths),
                                     collate_fn=mod.make_collate())
    for seed in (0, 3):
        np.random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = [b for _ in range(2) for b in loader]
        np.random.seed(seed)
        ours = [b for _ in range(2) for b in tl]
        assert len(ours) == len(theirs) == 2 * len(sampler)
        for a, b in zip(ours, theirs):
            _same(list(a), list(b))


def test_bad_options_refused_in_one_line():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shards = nlp.data.FixedBucketSampler(LENGTHS, 8, num_shards=2)
        used = nlp.data.FixedBucketSampler(LENGTHS, 8, shuffle=True)
        list(used)
        sorted_ = nlp.data.SortedBucketSampler(LENGTHS, 8)
    Pair = collections.namedtuple("Pair", "a b")
    named = B.NamedTuple(Pair, [B.Stack(), B.Stack()])
    ok = nlp.data.FixedBucketSampler(LENGTHS, 8)
    ds = mx.gluon.data.SimpleDataset(list(range(len(LENGTHS))))
    cases = [(shards, "num_shards=2"), (used, "iterated"), (sorted_, "SortedBucketSampler"),
             (mx.gluon.data.DataLoader(ds, batch_sampler=ok, batchify_fn=named), "NamedTuple"),
             (mx.gluon.data.DataLoader(ds, batch_sampler=ok), "default_batchify_fn")]
    assert translate_recipe(loader=ok).names == ["make_batch_sampler"]  # a bare sampler
    for loader, word in cases:
        with pytest.raises(RecipeError) as e:
            translate_recipe(loader=loader)
        assert word in str(e.value) and "\n" not in str(e.value), str(e.value)
