"""Live training demo: the webcam autoencoder learns from scratch, on the GPU, in the window.

    python demos/train_live.py                 # camera if present, else --folder, else synthetic
    python demos/train_live.py --folder photos/ --save mine.npz
    python demos/train_live.py --from-file         # fine-tune the shipped weights instead

The window shows input | reconstruction | enc1's activations | enc1's filters and the loss.
Keys: see `glcnn view` (h prints them); `[` `]` pick a layer, up/down a channel and `z` zeroes
its filter while training goes on (a Sigmoid layer's, e.g. dec2, grows back; a ReLU layer's
zeroed channel stays dead: ReLU's gradient at exactly 0 is 0). Same as
`glcnn train autoencoder --from-scratch --source camera`.
"""

import argparse
import sys

from glcnn.commands.train import reporter, summary, training_graph
from glcnn.errors import GlcnnError
from glcnn.viewer.sources import FolderSource, SyntheticSource, camera
from glcnn.viewer.training import Options, train


def open_frames(folder):
    """The camera if there is one, else `folder`'s images if given, else the synthetic pattern."""
    try:
        return camera()
    except GlcnnError as exc:
        print(exc, file=sys.stderr)
    if folder:
        print(f"training on the images of {folder}", file=sys.stderr)
        return FolderSource(folder)
    print("training on the synthetic source", file=sys.stderr)
    return SyntheticSource()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="images to train on when there is no camera")
    parser.add_argument("--from-file", action="store_true",
                        help="start from weights/autoencoder.npz, not from scratch")
    parser.add_argument("--steps", type=int, help="stop after N steps (default: on close)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--save", help="write the trained model (.npz) here")
    parser.add_argument("--screenshot", help="save the last frame as this PNG")
    args = parser.parse_args()
    graph = training_graph("autoencoder", from_scratch=not args.from_file)
    options = Options({"optimizer": "adam", "lr": args.lr}, args.steps, save=args.save,
                      layer="enc1", screenshot=args.screenshot)
    with reporter(args.steps) as report:
        result = train(graph, open_frames(args.folder), options, report)
    print(summary(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
