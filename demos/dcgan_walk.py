"""DCGAN latent walk: a live 4x4 grid of generated "coloured shapes", drifting smoothly.

    python demos/dcgan_walk.py [--model weights/dcgan_shapes.npz] [--frames N --screenshot F]

Each of the 16 tiles follows its own smooth path through latent space (spherical
interpolation between random key points). Per frame the generator runs 16 times on the
GPU and each result is drawn straight from its texture into its tile: only the 16 small
latent vectors travel from the CPU.
"""

import argparse
import sys
import time

import numpy as np

from glcnn import Pipeline
from glcnn.graph.passes import optimize
from glcnn.importers import load_graph
from glcnn.resources import resource_path
from glcnn.viewer.display import Display
from glcnn.viewer.latent import slerp
from glcnn.viewer.window import open_window, read_screen

TILE, GRID, STEPS_PER_KEY = 128, 4, 60


class LatentWalk:
    """16 latent paths; `at(frame)` gives the (16, nz) latents of that frame."""

    def __init__(self, nz, seed=0):
        self.rng = np.random.default_rng(seed)
        self.keys = [self.rng.standard_normal((GRID * GRID, nz)) for _ in range(2)]

    def at(self, frame):
        while frame // STEPS_PER_KEY + 1 >= len(self.keys):
            self.keys.append(self.rng.standard_normal(self.keys[0].shape))
        k, t = divmod(frame, STEPS_PER_KEY)
        t = 0.5 - 0.5 * np.cos(np.pi * t / STEPS_PER_KEY)  # ease in and out
        return np.stack([slerp(a, b, t) for a, b in zip(self.keys[k], self.keys[k + 1])])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="default: the shipped weights/dcgan_shapes.npz")
    parser.add_argument("--frames", type=int)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    args.model = args.model or resource_path("weights", "dcgan_shapes.npz")
    graph = optimize(load_graph(args.model))
    (z_name, z_shape), out = next(iter(graph.inputs.items())), graph.outputs[0]
    size = (GRID * TILE, GRID * TILE)
    glfw, window, ctx = open_window(size, "glcnn DCGAN latent walk")
    pipe, display = Pipeline(graph, ctx), Display(ctx)
    walk, frame = LatentWalk(z_shape[0]), 0
    print(f"dcgan_walk: {args.model} on {ctx.renderer}", file=sys.stderr)
    while not glfw.window_should_close(window):
        start = time.perf_counter()
        for i, z in enumerate(walk.at(frame)):
            pipe.upload(z_name, z.reshape(z_shape))
            pipe.execute()
            rect = ((i % GRID) * TILE, (GRID - 1 - i // GRID) * TILE, TILE, TILE)
            display.draw(ctx.gl.screen, rect, pipe.texture(out), pipe.shapes[out], "image",
                         value_range=graph.meta.get("output_range", (-1, 1)))
        frame += 1
        if args.frames and frame >= args.frames:
            if args.screenshot:
                save(ctx, size, args.screenshot)
            break
        glfw.swap_buffers(window)
        glfw.poll_events()
        glfw.set_window_title(window, f"glcnn DCGAN latent walk | "
                              f"{1 / (time.perf_counter() - start):.1f} FPS")
    display.release()
    pipe.release()
    glfw.destroy_window(window)
    return 0


def save(ctx, size, path):
    from PIL import Image
    Image.fromarray(read_screen(ctx, size)).save(path)  # not screen.read(): see read_screen
    print(f"dcgan_walk: saved {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
