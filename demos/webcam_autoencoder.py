"""Webcam autoencoder demo: input | reconstruction | a layer's activations | its filters.

    python demos/webcam_autoencoder.py                 # camera if there is one, else synthetic
    python demos/webcam_autoencoder.py --source clip.mp4 --layer enc2

Keys: see `glcnn view` (h prints them). Without a camera the demo says so and falls back
to the synthetic moving pattern (or pass a video file or a folder of images).
"""

import argparse
import sys

from glcnn.importers import load_graph
from glcnn.resources import resource_path
from glcnn.viewer.sources import open_source_or_synthetic
from glcnn.viewer.window import Viewer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="camera", help="camera[:N], synthetic, video, folder")
    parser.add_argument("--size", type=int, nargs=2, default=(128, 96), metavar=("W", "H"),
                        help="model input size (multiples of 4)")
    parser.add_argument("--layer", default="enc1")
    parser.add_argument("--frames", type=int)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    graph = load_graph(resource_path("weights", "autoencoder.npz"))
    w, h = args.size
    graph.inputs["image"] = (3, h, w)  # fully convolutional: any size, shapes are re-inferred
    with Viewer(graph, open_source_or_synthetic(args.source, (w, h)), args.layer) as viewer:
        viewer.run(frames=args.frames, screenshot=args.screenshot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
