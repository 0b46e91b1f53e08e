"""docs/demo.md's numbers are those of the demo run it quotes: the block between its markers is
what dualdl.demo.docs_numbers renders from that run's results.json (docs/data/demo_results.json),
and the figure is the run's own plot."""
import json
import os

from dualdl.demo import docs_numbers as D


def test_the_demo_page_block_is_generated_from_the_quoted_run():
    res = json.load(open(D.JSON))
    page = open(D.PAGE).read()
    assert D.BEGIN in page and D.END in page
    assert page == D.with_block(page, res), "docs/demo.md: run python -m dualdl.demo.docs_numbers DEMO_OUTPUT_DIR"


def test_the_quoted_run_says_where_it_ran_and_where_the_backends_part():
    res = json.load(open(D.JSON))
    assert {"cpu", "cores", "python", "torch", "mxnet", "date"} <= set(res["machine"])
    runs = {b: rs[0] for b, rs in res["runs"].items()}
    assert set(runs) == {"torch", "mxnet"}
    steps = len(runs["torch"]["step_losses"])
    assert steps == len(runs["mxnet"]["step_losses"]) == len(res["parting"]["loss_gap"]) > 100
    gaps = res["parting"]["loss_gap"]
    assert gaps == [abs(a - b) for a, b in zip(runs["torch"]["step_losses"], runs["mxnet"]["step_losses"])]
    assert max(gaps[:3]) < 1e-4 < max(gaps)          # identical start, float32 rounding, then apart
    assert all(len(r["epoch_accuracy"]) == res["settings"]["epochs"] for r in runs.values())
    assert os.path.getsize(D.PLOT) > 20_000
