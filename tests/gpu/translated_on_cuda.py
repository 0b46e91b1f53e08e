"""Generated translations on CUDA: the code ``dualdl translate`` writes depends on torch alone, so
it must run where users run it (a GPU, another torch version) with the numbers it was proven with.

Two stages, because the CUDA image has torch but no MXNet:

- ``make OUT_DIR`` (here, with MXNet): translates real corpus models (tests/_translate_corpus.py),
  then runs each generated module on the CPU in float32 and float64, eval forward and one train-mode
  backward of a fixed projection, and saves inputs, outputs and gradients beside the generated files.
- ``check OUT_DIR [--json FILE]`` (on the CUDA machine, torch only: it imports no dualdl): loads each
  generated file and its weights, moves the module to ``cuda``, runs the same in float32 and judges
  it against the CPU float64 run by the proof's rule: within 8x the CPU float32 run's own difference
  (+1e-6 of the tensor's scale), TF32 off. Printed: max relative difference of CUDA / of the CPU.

``make gpu-check`` does not run this (it needs files made with MXNet); the session that ran it on
an H200 recorded the result in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import Any, Dict, List

import numpy as np

# small models, one per construct that creates or moves tensors inside the forward: BilinearResize2D and
# adaptive pooling (Fast-SCNN), arange masks (NMT transformer, YOLOv3), zeros begin states (d2l RNN), a custom
# autograd function (ELMo's TiedMax), InstanceNorm + Pad (style transfer), numpy-interface code (d2l)
CASES = ["zoo:mobilenetv2_0.25", "gcv:cifar_resnet20_v1", "gcv:fastscnn_citys", "gcv:yolo3_mobilenet0.25_voc",
         "nlp:BERTModel", "nlp:NMTModel_transformer", "nlp:StandardRNN_lstm", "nlp:ELMoCharacterEncoder",
         "proj:style_transfer", "proj:mobilefacenet", "d2l:transformer_encoder_block", "d2l:rnn_begin_state",
         "d2l:seq2seq", "d2l:bert_model", "nlp:ELMoBiLM", "d2l:bn_lenet_scratch"]
MAX_WEIGHTS_MB = 30


def _flat(o: Any) -> List[Any]:
    return [v for e in o for v in _flat(e)] if isinstance(o, (list, tuple)) else [o]


def _load(folder: str):
    import torch
    from safetensors.torch import load_file
    meta = json.load(open(os.path.join(folder, "meta.json")))
    spec = importlib.util.spec_from_file_location(f"translated_{meta['file']}", os.path.join(folder, meta["file"] + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = getattr(mod, meta["class"])()
    m.load_state_dict(load_file(os.path.join(folder, meta["file"] + ".safetensors")))
    data = dict(np.load(os.path.join(folder, "data.npz")))
    return m, meta, data, torch


def _inputs(meta, data, torch, device, dtype):
    def build(struct, prefix):
        if isinstance(struct, list):
            return [build(s, f"{prefix}_{j}") for j, s in enumerate(struct)]
        t = torch.from_numpy(data[prefix]).to(device)
        return t.to(dtype) if t.is_floating_point() else t
    return [build(s, f"in{i}") for i, s in enumerate(meta["inputs"])]


def run(folder: str, device: str, float64: bool = False) -> Dict[str, List[np.ndarray]]:
    """Eval outputs, train-mode outputs and parameter gradients of a fixed projection, on ``device``
    (``float64``: the reference that float32 runs are judged against)."""
    m, meta, data, torch = _load(folder)
    dtype = torch.float64 if float64 else torch.float32
    m = m.to(device=device, dtype=dtype)
    xs = _inputs(meta, data, torch, device, dtype)
    m.eval()
    with torch.no_grad():
        ev = [o.detach().cpu().numpy() for o in _flat(m(*xs)) if torch.is_tensor(o)]
    out: Dict[str, List[np.ndarray]] = {"eval": ev}
    if meta["train"]:
        m.train()
        for mod in m.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        outs = [o for o in _flat(m(*xs)) if torch.is_tensor(o)]
        rng = np.random.default_rng(1)
        loss = sum((o * torch.from_numpy(rng.standard_normal(o.shape)).to(o.device, o.dtype)).sum()
                   for o in outs if o.is_floating_point())
        m.zero_grad()
        if loss.requires_grad:
            loss.backward()
        out["train"] = [o.detach().cpu().numpy() for o in outs]
        out["grads"] = [p.grad.detach().cpu().numpy() for _, p in sorted(m.named_parameters()) if p.grad is not None]
    return out


def make(out_dir: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import _translate_corpus as C
    from dualdl.port import translate
    os.makedirs(out_dir, exist_ok=True)
    for name in CASES:
        case = C.BY_NAME[name]
        if case.np_mode:
            from mxnet import npx
            npx.set_np()
        try:
            net, inputs = case.build()
            folder = os.path.join(out_dir, name.replace(":", "_").replace(".", "_"))
            rep = translate(net, inputs, folder, name="model", train=not case.inference)
        except Exception as e:      # noqa: BLE001 - reported, the others go on
            print(f"SKIP {name}: {type(e).__name__}: {str(e)[:160]}")
            continue
        finally:
            if case.np_mode:
                npx.reset_np()
        mb = os.path.getsize(rep.weights_path) / 2 ** 20
        if not rep.ok or mb > MAX_WEIGHTS_MB:
            print(f"SKIP {name}: {'not ok' if not rep.ok else f'{mb:.0f} MB of weights'}")
            continue
        arrays, struct = {}, []

        def put(x, prefix):
            if isinstance(x, (list, tuple)):
                return [put(v, f"{prefix}_{j}") for j, v in enumerate(x)]
            a = np.asarray(x)
            arrays[prefix] = a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(np.float32)
            return "t"
        struct = [put(x, f"in{i}") for i, x in enumerate(inputs)]
        json.dump({"file": "model", "class": rep.class_name, "inputs": struct, "train": not case.inference,
                   "case": name}, open(os.path.join(folder, "meta.json"), "w"))
        np.savez(os.path.join(folder, "data.npz"), **arrays)
        print(f"MADE {name}: {mb:.1f} MB of weights")


def check(out_dir: str, json_path: str = "", device: str = "cuda") -> int:
    import torch
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    where = torch.cuda.get_device_name(0) if device == "cuda" else device
    threads = torch.get_num_threads()
    rows, bad = [], 0
    for sub in sorted(os.listdir(out_dir)):
        folder = os.path.join(out_dir, sub)
        if not os.path.isfile(os.path.join(folder, "meta.json")):
            continue
        meta = json.load(open(os.path.join(folder, "meta.json")))
        try:
            ref = run(folder, "cpu", float64=True)
            cpu = []
            for n in (1, threads):      # the summation order changes float32 results: both are rounding
                torch.set_num_threads(n)
                cpu.append(run(folder, "cpu"))
            got = run(folder, device)
        except Exception as e:      # noqa: BLE001
            rows.append({"case": meta["case"], "error": f"{type(e).__name__}: {str(e)[:300]}"})
            bad += 1
            print(f"ERROR {meta['case']}: {type(e).__name__}: {str(e)[:300]}")
            continue
        row: Dict[str, Any] = {"case": meta["case"]}
        ok = True
        for k, vs in got.items():
            scale = max([float(np.abs(r).max()) for r in ref[k] if r.size] + [1e-30])
            worst, cpu_worst = 0.0, 0.0
            for i, v in enumerate(vs):
                r = ref[k][i].astype(np.float64)
                if not r.size:
                    continue
                d_gpu = float(np.abs(v.astype(np.float64) - r).max())
                d_cpu = max(float(np.abs(c[k][i].astype(np.float64) - r).max()) for c in cpu)
                ok &= d_gpu <= 8 * d_cpu + 1e-6 * scale      # the proof's rule: float32 rounding, as the CPU's
                worst, cpu_worst = max(worst, d_gpu / scale), max(cpu_worst, d_cpu / scale)
            row[k], row[k + "_cpu"] = worst, cpu_worst
        bad += not ok
        rows.append(row)
        print(f"{'OK  ' if ok else 'DIFF'} {meta['case']:32s} " +
              "  ".join(f"{k} {row[k]:.1e}/{row[k + '_cpu']:.1e}" for k in got))
    print(f"torch {torch.__version__} on {where}: {len(rows) - bad}/{len(rows)} within 8x the CPU's own float32 "
          f"rounding (each float32 run against the CPU float64 run)")
    if json_path:
        json.dump({"torch": torch.__version__, "device": where, "rows": rows}, open(json_path, "w"), indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stage", choices=("make", "check"))
    p.add_argument("out_dir")
    p.add_argument("--json", default="")
    p.add_argument("--device", default="cuda", help="check: where to run (cpu: a dry run of the stage)")
    a = p.parse_args()
    if a.stage == "make":
        make(a.out_dir)
    else:
        sys.exit(check(a.out_dir, a.json, a.device))
