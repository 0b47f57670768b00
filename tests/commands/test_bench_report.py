"""The text of `glcnn bench` (glcnn.commands.bench_report, GL-free): layer names cut to the
table's column stay distinct."""

from glcnn.commands.bench_report import format_report, short_names

LONG = ["/features/features.4/conv/conv.0/Conv", "/features/features.4/conv/conv.3/Conv"]


def test_long_names_sharing_a_prefix_keep_their_distinct_tails():
    cut = short_names(LONG + ["enc1"], 28)
    assert cut[2] == "enc1" and len(set(cut)) == 3 and all(len(c) <= 28 for c in cut)
    assert cut[0].endswith("conv.0/Conv") and cut[1].endswith("conv.3/Conv")


def test_names_alike_even_at_their_tail_get_a_suffix():
    names = ["/a/" + "x" * 40, "/b/" + "x" * 40, "/a/" + "x" * 40]
    cut = short_names(names, 28)
    assert cut[0] != cut[1] and cut[0] == cut[2] and all(len(c) <= 28 for c in cut)


def report(layers):
    timing = {"median_ms": 1.0, "min_ms": 1.0, "runs": 3, "fps": 1000.0, "gflops": 1.0}
    return {"model": "m.onnx", "inputs": {"x": [1, 3, 8, 8]}, "mflops": 1.0,
            "settings": {"runs": 3, "warmup": 1, "budget": 1.0},
            "machine": {"renderer": "r", "gl_version": "4.5", "cpu": "c", "cores": 2,
                        "load_average": "0"},
            "agreement": [], "against": {}, "ratios": {},
            "glcnn": {"fp32": {"readback": timing, "no_readback": timing, "layers": layers}}}


def test_the_bench_table_prints_two_long_layers_apart():
    layers = [{"layer": name, "op": "Conv", "shape": [8, 4, 4], "mflops": 1.0,
               "median_ms": 0.5, "share": 0.5} for name in LONG]
    text = format_report(report(layers))
    rows = [line.split()[0] for line in text.splitlines() if "Conv " in line]
    assert len(rows) == 2 and rows[0] != rows[1], text
