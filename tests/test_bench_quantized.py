"""`pathrag bench quantized`: its section states the paired interval's verdict and both models' identities."""

from pathrag_lab.bench.quantized import markdown_section


def _result(diff):
    model = {"identity": "st:m", "runtime": "st-onnx:m", "recall": {2: 0.4, 5: 0.6, 10: 0.7}, "mean_r": 0.57,
             "texts_per_s": 100.0}
    q8 = {**model, "identity": "st:m+quint8_avx2", "runtime": "st-onnx-q8:m", "texts_per_s": 130.0}
    return {"dataset": "musique-100", "passages": 10, "questions": 3, "models": {"full": model, "int8": q8},
            "int8_vs_full": diff, "cosine_min": 0.98, "cosine_median": 0.99, "speedup": 1.3}


def test_the_section_says_ties_only_when_the_interval_spans_zero():
    tie = markdown_section(_result([-0.011, -0.023, 0.002]))
    assert "**-0.011 [-0.023, +0.002]**, ties" in tie and "`st:m+quint8_avx2`" in tie and "1.3x" in tie
    assert "loses recall" in markdown_section(_result([-0.05, -0.08, -0.02]))
    assert "gains recall" in markdown_section(_result([0.05, 0.02, 0.08]))
