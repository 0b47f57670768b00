"""A slowly walking latent for generators: the viewer feeds a (nz, 1, 1) input with this
instead of camera frames (as demos/dcgan_walk.py does for its 16 tiles)."""

import numpy as np

STEPS_PER_KEY = 120  # frames from one random key point to the next


def slerp(a, b, t):
    """Spherical interpolation: stays on the shell where Gaussian latents live."""
    omega = np.arccos(np.clip(np.dot(a / np.linalg.norm(a), b / np.linalg.norm(b)), -1, 1))
    if omega < 1e-6:
        return (1 - t) * a + t * b
    return (np.sin((1 - t) * omega) * a + np.sin(t * omega) * b) / np.sin(omega)


class LatentWalk:
    """One smooth path through N(0, 1) latents of `shape`; `at(frame)` is a pure function
    of the frame number (tests recompute it), eased in and out between key points."""

    def __init__(self, shape, seed: int = 0):
        self.shape = tuple(shape)
        self.rng = np.random.default_rng(seed)
        self.keys = [self.rng.standard_normal(int(np.prod(shape))) for _ in range(2)]

    def at(self, frame: int) -> np.ndarray:
        while frame // STEPS_PER_KEY + 1 >= len(self.keys):
            self.keys.append(self.rng.standard_normal(self.keys[0].shape))
        k, t = divmod(frame, STEPS_PER_KEY)
        t = 0.5 - 0.5 * np.cos(np.pi * t / STEPS_PER_KEY)
        return slerp(self.keys[k], self.keys[k + 1], t).astype(np.float32).reshape(self.shape)
