"""Shared data and initial weights for the distributed training test scripts (numpy only)."""
import argparse
import json
import os

import numpy as np

N, D_IN, D_HID = 32, 10, 16


def make_data():
    rs = np.random.RandomState(0)
    X = rs.randn(N, D_IN).astype("float32")
    y = (X @ rs.randn(D_IN, 1) + 0.1 * rs.randn(N, 1)).astype("float32")
    return X, y


def init_weights(seed):
    """(out, in) weights like torch.nn.Linear and gluon Dense; rank-dependent seed on purpose."""
    rs = np.random.RandomState(seed)
    return {"0.weight": (0.3 * rs.randn(D_HID, D_IN)).astype("float32"),
            "0.bias": (0.3 * rs.randn(D_HID)).astype("float32"),
            "2.weight": (0.3 * rs.randn(1, D_HID)).astype("float32"),
            "2.bias": (0.3 * rs.randn(1)).astype("float32")}


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=12,
                    help="GLOBAL batch size (12: steps of 12, 12 and a short 8 per epoch)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--world-size", type=int, default=None, help="expected world size")
    return ap


def write_result(out, rank, **arrays_and_meta):
    meta = {k: v for k, v in arrays_and_meta.items() if not isinstance(v, np.ndarray)}
    arrays = {k: v for k, v in arrays_and_meta.items() if isinstance(v, np.ndarray)}
    np.savez(os.path.join(out, f"rank{rank}.npz"), **arrays)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(meta, f)
