"""Storage precisions end to end: u8 range scaling (calibration, no clamping), fp16, fp32.

Each precision is held to glcnn.runtime.precision.TOLERANCE against the float64 reference.
"""

import numpy as np
import pytest

import glcnn
from glcnn.graph import models, reference
from glcnn.graph.builder import Builder
from glcnn.graph.passes import optimize
from glcnn.runtime.precision import TOLERANCE

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def scaled_error(y, ref):
    return float(np.max(np.abs(y - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def signed_net(seed=0):
    """Conv stack whose activations are negative and far outside [0, 1]."""
    b = Builder(seed=seed)
    x = b.input("x", (5, 9, 11))
    h = b.conv(x, 13, 3, padding=1, name="c1")
    h = b.conv(h, 6, 3, stride=2, padding=1, activation="LeakyRelu", name="c2")
    y = b.conv_transpose(h, 7, 4, stride=2, padding=1, name="up")
    graph = b.build([y])
    for node in graph.nodes:
        node.weights["W"] = node.weights["W"] * 6  # values of several units, both signs
    return graph


def samples(shape, n=4, scale=3.0):
    rng = np.random.default_rng(42)
    return [(rng.standard_normal(shape) * scale).astype(np.float32) for _ in range(n)]


def test_u8_keeps_negative_and_large_values(ctx):
    graph = signed_net()
    xs = samples((5, 9, 11))
    glcnn.calibrate(graph, xs[1:], ctx)
    x = xs[0]
    values = reference.run(graph, {"x": x})
    assert values["c1"].min() < -5 and values["c1"].max() > 5  # really outside [0, 1]
    with glcnn.Pipeline(graph, ctx, precision="u8", keep="all") as pipe:
        y = pipe.run(x)
        for name in ("c1", "c2"):
            assert scaled_error(pipe.read(name), values[name]) <= TOLERANCE["u8"], name
    assert scaled_error(y, values["up"]) <= TOLERANCE["u8"]


def test_plain_rgba8_without_range_scaling_clamps(ctx):
    """The same tensors stored in RGBA8 as they are (range [0, 1]) lose everything outside."""
    graph = signed_net()
    x = samples((5, 9, 11))[0]
    values = reference.run(graph, {"x": x})
    graph.meta["u8_ranges"] = {name: [[0.0] * s[0], [1.0] * s[0]]
                               for name, s in glcnn.ops.build_ops(graph)[1].items()}
    with glcnn.Pipeline(graph, ctx, precision="u8", keep="all") as pipe:
        pipe.run(x)
        c1 = pipe.read("c1")
    assert c1.min() >= 0 and c1.max() <= 1
    assert scaled_error(c1, values["c1"]) > 0.5


def test_calibration_is_saved_with_the_model(ctx, tmp_path):
    graph = optimize(signed_net(seed=1))
    xs = samples((5, 9, 11))
    ranges = glcnn.calibrate(graph, xs, ctx)
    assert set(ranges) == {"x", "c1", "c2", "up"}
    glcnn.save(graph, tmp_path / "m.npz")
    with glcnn.load(tmp_path / "m.npz", ctx, precision="u8") as pipe:  # no calibration here
        y = pipe.run(xs[0])
    assert scaled_error(y, reference.run(graph, {"x": xs[0]})["up"]) <= TOLERANCE["u8"]


def test_u8_without_calibration_is_refused(ctx):
    with pytest.raises(glcnn.GlcnnError, match="glcnn.calibrate"):
        glcnn.Pipeline(signed_net(), ctx, precision="u8")


def test_calibrated_ranges_match_numpy_minmax(ctx):
    graph = signed_net(seed=2)
    xs = samples((5, 9, 11), n=3)
    ranges = glcnn.calibrate(graph, xs, ctx, margin=0.0)
    for name in ("x", "c1", "up"):
        stacked = np.stack([reference.run(graph, {"x": x})[name] for x in xs])
        np.testing.assert_allclose(ranges[name][0], stacked.min(axis=(0, 2, 3)), rtol=1e-5)
        np.testing.assert_allclose(ranges[name][1], stacked.max(axis=(0, 2, 3)), rtol=1e-5)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
def test_shipped_autoencoder_per_precision(ctx, precision):
    from PIL import Image
    x = np.asarray(Image.open(ROOT / "demos/data/coffee_128.png"), np.float32)
    x = x.transpose(2, 0, 1) / 255.0
    graph = optimize(glcnn.load_graph(ROOT / "weights/autoencoder.npz"))
    ref = reference.run(graph, {"image": x})["dec2"]
    if precision == "u8":
        shifted = [np.roll(x, s, axis=2) for s in (7, 31, 64)]  # calibrate on other crops
        glcnn.calibrate(graph, shifted, ctx)
    for strategy in ("blocked", "direct"):
        with glcnn.Pipeline(graph, ctx, precision=precision, strategy=strategy) as pipe:
            assert scaled_error(pipe.run(x), ref) <= TOLERANCE[precision], strategy


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
def test_dcgan_generator_per_precision(ctx, precision):
    graph = models.dcgan_generator(nz=16, ngf=8)
    for node in graph.nodes:  # seeded init makes tiny outputs; scale up to use tanh's range
        node.weights["W"] = node.weights["W"] * 3
    zs = samples((16, 1, 1), n=129, scale=1.0)
    if precision == "u8":  # 1x1 latents: a per-channel range needs many samples to cover z
        glcnn.calibrate(graph, zs[1:], ctx)
    ref = reference.run(graph, {"z": zs[0]})["main.13"]
    assert np.abs(ref).max() > 0.3
    for strategy in ("blocked", "direct"):
        with glcnn.Pipeline(graph, ctx, precision=precision, strategy=strategy) as pipe:
            assert scaled_error(pipe.run(zs[0]), ref) <= TOLERANCE[precision], strategy


U8_OPS = [
    ("Conv", {"pads": [1, 1, 1, 1], "group": 1}, [(5, 7, 9)], {"W": (6, 5, 3, 3), "B": (6,)}),
    ("Conv", {"group": 5, "strides": [2, 2]}, [(5, 8, 8)], {"W": (5, 1, 3, 3)}),
    ("ConvTranspose", {"strides": [2, 2], "pads": [1, 1, 1, 1]}, [(6, 5, 4)],
     {"W": (6, 3, 4, 4), "B": (3,)}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     [(13, 9, 7)], {}),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [(3, 8, 6)], {}),
    ("Resize", {"mode": "linear", "scales": [2.0, 2.0],
                "coordinate_transformation_mode": "half_pixel"}, [(5, 4, 6)], {}),
    ("Concat", {"axis": 1}, [(3, 5, 5), (6, 5, 5)], {}),
    ("Add", {}, [(7, 6, 5), (7, 6, 5)], {}),
    ("Sigmoid", {}, [(5, 6, 7)], {}),
    ("GlobalAveragePool", {}, [(9, 6, 5)], {}),
    ("InstanceNormalization", {"epsilon": 1e-5}, [(5, 6, 7)], {"scale": (5,), "B": (5,)}),
]


@pytest.mark.parametrize("op,attrs,in_shapes,weights", U8_OPS,
                         ids=[f"{op.lower()}-{i}-u8" for i, (op, *_) in enumerate(U8_OPS)])
def test_ops_in_u8(ctx, op, attrs, in_shapes, weights):
    from glcnn.graph import Graph, Node
    rng = np.random.default_rng(7)
    names = [f"x{i}" for i in range(len(in_shapes))]
    w = {k: rng.standard_normal(s).astype(np.float32) for k, s in weights.items()}
    graph = Graph(dict(zip(names, in_shapes)), [Node(op, "y", names, attrs, w)], ["y"])
    feeds = [{n: (rng.standard_normal(s) * 4).astype(np.float32) for n, s in
              zip(names, in_shapes)} for _ in range(6)]
    # The evaluated input is among the calibration samples: this measures the op's 8-bit
    # storage error, not how well 5 samples cover a 6th (whole-model tests above do that).
    glcnn.calibrate(graph, feeds, ctx)
    ref = reference.run(graph, feeds[0])["y"]
    with glcnn.Pipeline(graph, ctx, precision="u8") as pipe:
        err = scaled_error(pipe.run(feeds[0]), ref)
    assert err <= TOLERANCE["u8"], f"{op} {attrs} {in_shapes}: u8 scaled error {err:.3g}"
