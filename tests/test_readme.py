"""Every ```python block of README.md runs as written, each in a fresh Python process.

The source is not edited: a file name the README uses as a placeholder for the reader's own
file gets a stand-in of that name in the block's working folder (PLACEHOLDERS), and the
shipped `weights/` folder is linked in, so the README's relative paths resolve. After a
block has run, what it left (the numpy arrays it named, the files it saved) is checked
against an independent reference (CHECKS: numpy float64 or PyTorch). A block without a
check fails: running without comparing proves only that nothing raised.
"""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import assert_all_close, assert_close, storable
from onnx import helper
from onnx_models import make_model, rand

import glcnn
from glcnn.graph import reference

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)

# Runs one block in a fresh namespace (the file named as README.md, its lines numbered as
# there), then saves the numpy arrays it left for the checks.
DRIVER = """
import sys
import numpy as np
source, name = open(sys.argv[1]).read(), sys.argv[2]
namespace = {"__name__": "__main__"}
exec(compile(source, name, "exec"), namespace)
np.savez("arrays.npz", **{k: v for k, v in namespace.items() if isinstance(v, np.ndarray)})
"""


def python_blocks() -> list[tuple[int, str]]:
    """(line of the block's first source line in README.md, source) of each python fence."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in FENCE.finditer(text)]


# --- stand-ins for the reader's files ---------------------------------------------------------
def classifier_onnx(path: Path) -> None:
    """A small ONNX classifier, (1, 3, 32, 32) → (1, 10): Conv → Relu → GAP → Flatten → Gemm."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "W", "B"], ["conv"], pads=[1, 1, 1, 1]),
             n("Relu", ["conv"], ["relu"]),
             n("GlobalAveragePool", ["relu"], ["gap"]),
             n("Flatten", ["gap"], ["flat"]),
             n("Gemm", ["flat", "fc_W", "fc_B"], ["logits"], transB=1)]
    weights = {"W": rand(8, 3, 3, 3), "B": rand(8, seed=1), "fc_W": rand(10, 8, seed=2),
               "fc_B": rand(10, seed=3)}
    model = make_model(nodes, {"x": [1, 3, 32, 32]}, {"logits": [1, 10]}, weights)
    path.write_bytes(model.SerializeToString())


class BuilderNet(torch.nn.Module):
    """The README's Builder model as PyTorch defines it (same layer names), seeded."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc1 = torch.nn.Conv2d(3, 64, 4, stride=2, padding=1)
        self.dec1 = torch.nn.ConvTranspose2d(64, 3, 4, stride=2, padding=1)

    def forward(self, x):
        return torch.sigmoid(self.dec1(torch.relu(self.enc1(x))))


def state_dict_npz(path: Path) -> None:
    """BuilderNet's state_dict saved the README's way (np.savez of v.numpy())."""
    np.savez(path, **{k: v.numpy() for k, v in BuilderNet().state_dict().items()})


PLACEHOLDERS = {
    "mobilenet.onnx": classifier_onnx,  # any ONNX classifier: the block only loads it
    "model.onnx": classifier_onnx,  # the u8 block's samples are (1, 3, 32, 32)
    "w.npz": state_dict_npz,
}


# --- checks of what a block left -------------------------------------------------------------
def check_api(ctx, folder: Path, arrays) -> None:
    """`y = pending.result()`: the shipped autoencoder on the block's `x`, against numpy."""
    graph = glcnn.load_graph(ROOT / "weights/autoencoder.npz")
    ref = reference.run(graph, {"image": arrays["x"]})
    assert_all_close({"dec2": arrays["y"]}, {"dec2": ref["dec2"]}, "fp32", "README API block")


def check_builder(ctx, folder: Path, arrays) -> None:
    """model.npz holds w.npz's weights, and runs (fp16, as the block's pipe) like PyTorch."""
    graph = glcnn.load_graph(folder / "model.npz")
    state = np.load(folder / "w.npz")
    for key, (layer, weight) in {"enc1.weight": ("enc1", "W"), "dec1.bias": ("dec1", "B")}.items():
        np.testing.assert_array_equal(graph.node(layer).weights[weight], state[key])
    x = storable(np.random.default_rng(0).random((3, 32, 32)), "fp16")
    with torch.no_grad():
        want = BuilderNet().double()(torch.from_numpy(x[None]).double())
    with glcnn.Pipeline(graph, ctx, precision="fp16") as pipe:
        y = pipe.run(x)
    assert_all_close({"dec1": y}, {"dec1": want[0].numpy()}, "fp16", "README Builder block")


def check_u8(ctx, folder: Path, arrays) -> None:
    """model_u8.npz, calibrated on the block's samples, runs in u8 like numpy runs the ONNX."""
    assert glcnn.load_graph(folder / "model_u8.npz").meta["u8_ranges"]
    x = arrays["x1"][0]
    ref = reference.run(glcnn.load_graph(folder / "model.onnx"), {"x": x})["logits"]
    with glcnn.load(folder / "model_u8.npz", ctx=ctx, precision="u8") as pipe:
        y = pipe.run(x)
    assert_all_close({"logits": np.reshape(y, ref.shape)}, {"logits": ref}, "u8",
                     "README u8 block")


def check_custom_layers(ctx, folder: Path, arrays) -> None:
    """The custom TF.js layers block: Conv2D 'same' -> depthToSpace(2, NHWC) -> x 0.5, as
    PyTorch and numpy compute it from the block's kernel (Keras HWIO) and x (NHWC)."""
    x = torch.from_numpy(arrays["x"]).permute(0, 3, 1, 2).double()
    kernel = torch.from_numpy(arrays["kernel"]).permute(3, 2, 0, 1).double()
    conv = torch.nn.functional.conv2d(x, kernel, padding=1)[0].permute(1, 2, 0).numpy()
    h, w, c = conv.shape  # TF depthToSpace: channel (i * 2 + j) * C' + c goes to (2h + i, 2w + j)
    shuffled = conv.reshape(h, w, 2, 2, c // 4).transpose(0, 2, 1, 3, 4)
    expected = 0.5 * shuffled.reshape(2 * h, 2 * w, c // 4)[None]
    assert_close(arrays["y"], expected, "fp32", "README custom TF.js layers block")


def check_training(ctx, folder: Path, arrays) -> None:
    """The Trainer block: its 5 Adam losses and enc1 weights are PyTorch's from the same init
    (1e-3 relative); trained.npz and the trainer's pipeline run the trained weights."""
    b = glcnn.Builder(seed=0)
    x = b.input("image", (3, 16, 16))
    h = b.conv(x, 8, 4, stride=2, padding=1, activation="Relu", name="enc1")
    graph = b.build([b.conv_transpose(h, 3, 4, stride=2, padding=1, activation="Sigmoid",
                                      name="dec1")])
    params = {f"{n.name}.{k}": torch.tensor(np.asarray(n.weights[key], np.float64),
                                            requires_grad=True)
              for n in graph.nodes for k, key in (("weight", "W"), ("bias", "B"))}
    opt = torch.optim.Adam(params.values(), lr=1e-2)
    batch = torch.from_numpy(np.random.default_rng(0).random((4, 3, 16, 16), dtype=np.float32))
    for got in arrays["losses"]:
        h = torch.relu(torch.nn.functional.conv2d(batch.double(), params["enc1.weight"],
                                                  params["enc1.bias"], 2, 1))
        y = torch.sigmoid(torch.nn.functional.conv_transpose2d(h, params["dec1.weight"],
                                                               params["dec1.bias"], 2, 1))
        loss = torch.nn.functional.mse_loss(y, batch.double())
        assert abs(got - loss.item()) <= 1e-3 * loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    want = params["enc1.weight"].detach().numpy()
    assert np.abs(arrays["enc1_weight"] - want).max() <= 1e-3 * np.abs(want).max()
    trained = glcnn.load_graph(folder / "trained.npz")
    ref = reference.run(trained, {"image": batch[0].numpy()})["dec1"]
    assert_all_close({"dec1": arrays["y"]}, {"dec1": ref}, "fp32", "README training block")


# A block's check is chosen by a line only that block holds.
CHECKS = {
    't.save("trained.npz")': check_training,
    'tfjs.register_layer("PixelShuffle2x"': check_custom_layers,
    'y = pending.result()': check_api,
    'graph = b.build([y], weights="w.npz")': check_builder,
    'glcnn.save(graph, "model_u8.npz")': check_u8,
}

BLOCKS = python_blocks()


def run_block(folder: Path, line: int, source: str) -> dict:
    """Run `source` (README.md from `line`) in a fresh process in `folder`; its arrays."""
    (folder / "block.py").write_text("\n" * (line - 1) + source)
    done = subprocess.run([sys.executable, "-c", DRIVER, "block.py", str(README)],
                          cwd=folder, capture_output=True, text=True, timeout=600)
    if done.returncode:
        pytest.fail(f"README.md block at line {line} failed:\n{done.stderr}", pytrace=False)
    return dict(np.load(folder / "arrays.npz"))


def test_every_block_and_placeholder_is_covered():
    sources = [source for _, source in BLOCKS]
    assert len(sources) >= 3, f"found {len(sources)} python blocks in {README}"
    for name in PLACEHOLDERS:
        assert any(f'"{name}"' in s for s in sources), f"placeholder {name} is in no block"
    for marker in CHECKS:
        assert sum(marker in s for s in sources) == 1, f"{marker!r}: not in exactly one block"
    for line, source in BLOCKS:
        assert any(marker in source for marker in CHECKS), \
            f"README.md block at line {line} has no check in CHECKS"


@pytest.mark.parametrize("line,source", BLOCKS, ids=[f"README-line{line}" for line, _ in BLOCKS])
def test_readme_block_runs_as_written(ctx, tmp_path, line, source):
    (tmp_path / "weights").symlink_to(ROOT / "weights")
    for name, write in PLACEHOLDERS.items():
        write(tmp_path / name)
    arrays = run_block(tmp_path, line, source)
    for marker, check in CHECKS.items():
        if marker in source:
            check(ctx, tmp_path, arrays)
