"""Training on the GPU (issue 23): backward ops, losses and optimisers as fragment shaders.

`Trainer` (trainer.py) runs them; backward.py builds the backward graph, grad_ops.py declares
its ops, reference.py is their numpy reference, optim.py the optimiser passes.
"""

from . import reference  # noqa: F401  (registers the backward ops' evaluators)
from .trainer import Trainer

__all__ = ["Trainer"]
