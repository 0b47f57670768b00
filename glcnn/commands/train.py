"""`glcnn train MODEL --source SOURCE` and `glcnn view MODEL --train`: the options, the graph
trained (at a training size, from the file's weights or from scratch) and the progress on
stderr. The loop and the window are glcnn.viewer.training's; glcnn/cli.py joins them.
"""

import contextlib
import dataclasses
import sys
import time

import numpy as np

from ..errors import GlcnnError, quote
from ..graph.graph import Graph
from ..importers.prepared import load_optimized
from ..ops import build_ops
from .progress import bar

SIDE = 32  # default training size: the autoencoder's 32×32 patches, fast enough to watch
OPTIMIZERS = ("adam", "adamw", "sgd")
INITIALISED = ("Conv", "ConvTranspose")
EVERY = 50  # steps between progress lines when stderr is no terminal


def add_options(command, view: bool) -> None:
    """The training options of `command` (`glcnn view` already has --source, --layer,
    --size and --screenshot; `view` adds --train)."""
    if view:
        command.add_argument("--train", action="store_true",
                             help="train the model on the source's frames (glcnn train)")
    else:
        command.add_argument("--source", default="synthetic",
                             help="synthetic (default), camera, camera:N, a video or a folder")
        command.add_argument("--layer", help="layer shown first (default: the first)")
        command.add_argument("--size", type=int, nargs=2, metavar=("W", "H"),
                             help=f"train at this input size (default {SIDE} {SIDE} when the "
                                  "model runs at it, else its own)")
        command.add_argument("--screenshot", help="save the window's last frame as this PNG")
    group = command.add_argument_group("training (target = input: reconstruction)")
    group.add_argument("--steps", type=int, help="stop after N steps (default: when the "
                       "window closes)")
    group.add_argument("--seconds", type=float, help="stop after S seconds of training")
    group.add_argument("--batch", type=int, default=1, help="frames per step (default 1)")
    group.add_argument("--lr", type=float, default=2e-3, help="learning rate (default 2e-3)")
    group.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    group.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    group.add_argument("--loss", choices=("mse", "l1", "bce"), default="mse")
    group.add_argument("--save", metavar="OUT.npz", help="write the trained model here")
    group.add_argument("--from-scratch", action="store_true",
                       help="start from a seeded random init (PyTorch's default ranges)")
    group.add_argument("--seed", type=int, default=0, help="seed of the init and the replay")
    group.add_argument("--no-window", action="store_true", help="train without the window")


def settings(args) -> dict:
    """glcnn.Trainer keyword arguments from the options."""
    out = {"loss": args.loss, "optimizer": args.optimizer, "lr": args.lr}
    return out | ({"momentum": args.momentum} if args.optimizer == "sgd" else {})


def check(args) -> None:
    """Raises GlcnnError on option values no training can use."""
    if args.batch < 1 or (args.steps is not None and args.steps < 1) or \
            (args.seconds is not None and not args.seconds > 0):
        raise GlcnnError(f"--batch {args.batch}, --steps {args.steps}, --seconds "
                         f"{args.seconds}: expected positive numbers")
    if args.save and not str(args.save).endswith(".npz"):
        raise GlcnnError(f"--save {quote(args.save)}: the trained model is saved as .npz")


def training_graph(model: str, size=None, from_scratch: bool = False, seed: int = 0) -> Graph:
    """The graph to train: `model` at input `size` (W, H) (default: SIDE² when the model runs
    at it, else its own size), from scratch (`reinitialised`) if asked."""
    graph = load_optimized(model)
    name, (c, h, w) = next(iter(graph.inputs.items()))
    sizes = [size] if size else [(SIDE, SIDE), (w, h)]
    for width, height in sizes:
        resized = dataclasses.replace(graph, inputs=graph.inputs | {name: (c, height, width)})
        try:
            _, shapes = build_ops(resized)
        except GlcnnError:
            if size:
                raise
            continue
        out = shapes[resized.outputs[0]]
        if out != (c, height, width):
            raise GlcnnError(f"{model}: training reconstructs the input, but output "
                             f"{quote(resized.outputs[0])} {out} does not have the shape of input "
                             f"{quote(name)}, {(c, height, width)}")
        return reinitialised(resized, seed) if from_scratch else resized
    raise GlcnnError(f"{model}: cannot run at {SIDE}x{SIDE} or at its own size {w}x{h}")


def reinitialised(graph: Graph, seed: int = 0) -> Graph:
    """A copy of `graph` whose Conv and ConvTranspose weights and biases are drawn as
    glcnn.Builder(seed) draws them (PyTorch's default: uniform in ±1/√fan_in, fan_in = W[0]'s
    size), layer by layer in order: the shipped autoencoder's equals graph.models.autoencoder's."""
    rng = np.random.default_rng(seed)
    nodes = []
    for node in graph.nodes:
        if node.op in INITIALISED:
            shape = np.shape(node.weights["W"])
            bound = 1.0 / np.sqrt(np.prod(shape[1:]))
            weights = {"W": rng.uniform(-bound, bound, shape).astype(np.float32)}
            if "B" in node.weights:
                weights["B"] = rng.uniform(-bound, bound,
                                           np.shape(node.weights["B"])).astype(np.float32)
            node = dataclasses.replace(node, weights=node.weights | weights)
        nodes.append(node)
    return dataclasses.replace(graph, nodes=nodes)


@contextlib.contextmanager
def reporter(steps: int | None, quiet: bool = False):
    """report(step, loss) for the training loop: a tqdm bar on a terminal, else a line every
    EVERY steps on stderr; nothing with `quiet`."""
    start = time.perf_counter()
    with bar(steps, "training", quiet, unit="step") as progress:
        def report(step: int, loss: float) -> None:
            if quiet:
                return
            if not progress.disable:
                progress.update(1)
                progress.set_postfix_str(f"loss {loss:.5f}")
            elif step == 1 or step % EVERY == 0 or step == steps:
                rate = step / max(time.perf_counter() - start, 1e-6)
                print(f"glcnn train: step {step}{f'/{steps}' if steps else ''}  loss "
                      f"{loss:.6f}  {rate:.1f} steps/s", file=sys.stderr, flush=True)
        yield report


def summary(result: dict) -> str:
    """The last line of `glcnn train`: steps, time, loss, held-out PSNR (synthetic source)."""
    losses, seconds = result["losses"], result["seconds"]
    line = (f"glcnn train: {len(losses)} steps in {seconds:.1f} s "
            f"({len(losses) / max(seconds, 1e-6):.1f} steps/s)")
    if losses:
        line += f", loss {losses[0]:.5f} -> {losses[-1]:.5f}"
    if result["psnr"] is not None:
        line += ", held-out PSNR {:.2f} -> {:.2f} dB".format(*result["psnr"])
    return line
