"""pad_collate and bucketing: variable-length sequences padded identically on both backends."""
import numpy as np
import pytest

import dualdl as dl
from dualdl.data import (ArrayDataset, BucketBatchSampler, DataLoader, default_collate,
                         pad_collate)


def _seqs(n=17, feat=3, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, n)
    xs = [rng.standard_normal((t, feat)).astype(np.float32) for t in lengths]
    labels = [rng.integers(0, 5, rng.integers(1, 6)).astype(np.int64) for _ in range(n)]
    return xs, labels, lengths


@pytest.mark.parametrize("layout", ["NTC", "TNC"])
def test_pad_collate_round_trips_lengths(layout):
    xs, labels, _ = _seqs()
    cls = np.arange(len(xs))
    samples = list(zip(xs, labels, cls))[:5]
    padded, xlen, lab, lablen, c = pad_collate(pad_value=(0.0, -1), layout=(layout, "NT"))(samples)
    assert xlen.dtype == np.int64 and lablen.dtype == np.int64
    T = max(len(x) for x, _, _ in samples)
    assert padded.shape == ((5, T, 3) if layout == "NTC" else (T, 5, 3)) and padded.dtype == np.float32
    assert lab.shape == (5, max(len(l) for _, l, _ in samples))
    seq_first = padded if layout == "NTC" else np.swapaxes(padded, 0, 1)
    for k, (x, l, _) in enumerate(samples):
        assert xlen[k] == len(x) and lablen[k] == len(l)
        assert np.array_equal(seq_first[k, :xlen[k]], x)
        assert np.all(seq_first[k, xlen[k]:] == 0)
        assert np.array_equal(lab[k, :lablen[k]], l) and np.all(lab[k, lablen[k]:] == -1)
    assert np.array_equal(c, cls[:5])


def test_pad_collate_single_array_and_errors():
    padded, lengths = pad_collate(pad_value=7)([np.arange(3), np.arange(1)])
    assert padded.tolist() == [[0, 1, 2], [0, 7, 7]] and lengths.tolist() == [3, 1]
    with pytest.raises(ValueError, match="does not fit"):
        pad_collate(pad_value=-1)([np.arange(2, dtype=np.uint8)])
    with pytest.raises(ValueError, match="beyond the time axis"):
        pad_collate()([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError, match="layout"):
        pad_collate(layout="NCT")
    assert default_collate([(1, 2.0), (3, 4.0)])[1].dtype == np.float64


def test_bucketed_padded_batches_identical_on_both_backends():
    xs, labels, lengths = _seqs(40)
    ds = ArrayDataset(xs, labels)
    out = {}
    for name in ("torch", "mxnet"):
        sampler = BucketBatchSampler(lengths, batch_size=6, shuffle=True, seed=3, bucket_size=18)
        loader = DataLoader(ds, batch_sampler=sampler, collate_fn=pad_collate(pad_value=(0, -1), layout="TNC"),
                            backend=name)
        out[name] = [[dl.to_numpy(t) for t in b] for b in loader]
    seen = []
    for bt, bm in zip(out["torch"], out["mxnet"]):
        for a, b in zip(bt, bm):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        x, xlen, lab, lablen = bt
        assert x.shape[0] == xlen.max()                     # TNC: time first, padded to the batch max
        seen += xlen.tolist()
    assert sorted(seen) == sorted(lengths.tolist())


@pytest.mark.parametrize("samples", [[1.5, 2.5], [1, 2], [True, False], [np.float32(1), np.float32(2)],
                                     [np.ones(2), np.zeros(2)], [np.int32(1), np.int32(3)],
                                     [np.ones((2, 2), np.uint8)] * 3])
def test_default_collate_dtype_matches_both_frameworks(samples):
    from mxnet.gluon.data.dataloader import default_batchify_fn
    from torch.utils.data import default_collate as torch_collate
    ours = default_collate(samples)
    t = torch_collate(samples).numpy()
    g = default_batchify_fn(samples).asnumpy()
    assert ours.dtype == t.dtype == g.dtype
    assert np.array_equal(ours, t) and np.array_equal(ours, g)


def test_ctc_batch_feeds_both_frameworks_ctc_losses():
    """The padded CTC batch is what torch's ctc_loss and Gluon's CTCLoss expect (blank = last class)."""
    import mxnet as mx
    import torch
    rng = np.random.default_rng(1)
    C = 6
    samples = []
    for t in (9, 5, 7, 12):
        feats = rng.standard_normal((t, C)).astype(np.float32)            # per-frame class scores
        label = rng.integers(0, C - 1, rng.integers(1, 4)).astype(np.int64)
        samples.append((feats, label))
    x, xlen, lab, lablen = pad_collate(pad_value=(0.0, -1), layout=("TNC", "NT"))(samples)
    logp = torch.log_softmax(torch.from_numpy(x), dim=-1)
    ours_t = torch.nn.functional.ctc_loss(logp, torch.from_numpy(lab), torch.from_numpy(xlen),
                                          torch.from_numpy(lablen), blank=C - 1, reduction="none")
    ref = np.array([torch.nn.functional.ctc_loss(
        torch.log_softmax(torch.from_numpy(f), -1)[:, None], torch.from_numpy(l)[None],
        torch.tensor([len(f)]), torch.tensor([len(l)]), blank=C - 1, reduction="none").item()
        for f, l in samples])
    g = mx.gluon.loss.CTCLoss(layout="TNC", label_layout="NT")(
        mx.nd.array(x), mx.nd.array(lab, dtype="float32"), mx.nd.array(xlen, dtype="float32"),
        mx.nd.array(lablen, dtype="float32")).asnumpy()
    assert np.max(np.abs(ours_t.numpy() - ref)) < 1e-5            # padding changed nothing (torch)
    assert np.max(np.abs(g - ref) / np.abs(ref)) < 1e-5            # Gluon on the same batch
