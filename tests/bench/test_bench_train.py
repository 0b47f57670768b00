"""bench/bench_train.py's pure parts on made-up numbers: steps/s, loss agreement, TF padding
and the markdown table. Nothing is timed, trained or fetched here."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_train as bt  # noqa: E402


def test_steps_per_second_is_one_over_the_median():
    assert bt.steps_per_second([100.0, 50.0, 400.0]) == pytest.approx(10.0)
    assert bt.steps_per_second([20.0, 30.0]) == pytest.approx(40.0)  # median 25 ms


def test_loss_error_is_relative():
    assert bt.loss_error(1.001, 1.0) == pytest.approx(1e-3)
    assert bt.loss_error(0.0, 0.0) == 0.0


@pytest.mark.parametrize(("kernel", "stride", "pad", "transposed", "size_in", "size_out", "want"), [
    (4, 2, 1, False, 32, 16, "same"),  # the autoencoder's convs
    (4, 2, 1, True, 8, 16, "same"),  # its transposed convs
    (4, 1, 0, True, 1, 4, "valid"),  # the DCGAN's first layer
    (3, 1, 0, False, 9, 7, "valid"),
])
def test_tf_padding(kernel, stride, pad, transposed, size_in, size_out, want):
    assert bt.tf_padding(kernel, stride, pad, transposed, size_in, size_out) == want


def test_tf_padding_refuses_a_padding_tf_has_not():
    with pytest.raises(ValueError, match="neither"):
        bt.tf_padding(3, 1, 2, False, 8, 10)


RESULTS = {
    "autoencoder-1": {
        "glcnn": {"first_loss": 0.08, "times_ms": [100.0, 120.0, 110.0]},
        "torch": {"first_loss": 0.08004, "times_ms": [20.0, 22.0, 21.0]},
        "tfjs-cpu": {"first_loss": 0.09, "times_ms": [1000.0]},
        "tfjs-wasm": {"error": "Kernel 'Conv2DBackpropFilter' not registered"},
    },
}
INFO = {"date": "2026-11-26T03:00:00+00:00", "cpu": "Some CPU", "cores": 2,
        "renderer": "llvmpipe", "gl_version": "4.5", "python": "3.12", "numpy": "2.0",
        "torch": "2.13.0", "tfjs": "4.22.0", "node": "v20", "glcnn": "0.1",
        "load_average": "0.50 0.40 0.30", "load_average_end": "0.60 0.50 0.40"}


def test_result_rows_rate_ratio_and_agreement():
    rows = bt.result_rows(bt.CASES["autoencoder-1"], RESULTS["autoencoder-1"])
    by_impl = {r[2]: r for r in rows}
    assert by_impl["glcnn"][3:] == ["0.08", "9.09", "110.0", "1.00"]
    assert by_impl["torch"][3] == "0.08004 (5.0e-04)"  # within 1e-3: no flag
    assert by_impl["torch"][4:] == ["47.6", "21.0", "0.19"]
    assert "DISAGREES" in by_impl["tfjs-cpu"][3]
    assert by_impl["tfjs-cpu"][6] == "9.09"  # glcnn 9.09 steps/s ÷ 1 step/s
    assert by_impl["tfjs-wasm"][3].startswith("not run: Kernel")


def test_markdown_has_command_machine_and_one_row_per_implementation():
    text = bt.markdown(INFO, RESULTS, "python bench/bench_train.py", 42.0)
    assert text.startswith("Command: `python bench/bench_train.py` (2026-11-26T03:00:00+00:00")
    assert "Some CPU, 2 cores; llvmpipe" in text and "TF.js 4.22.0 in node v20" in text
    assert "load average 0.50 0.40 0.30 at the start, 0.60 0.50 0.40 at the end" in text
    assert sum(line.startswith("| 32² autoencoder | 1 |") for line in text.splitlines()) == 4
