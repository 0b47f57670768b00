"""How a (C, H, W) tensor sits in one RGBA texture: the tile-grid ("atlas") layout.

Four consecutive channels share one RGBA texel; that group is a *slice*. The
S = ceil(C / 4) slices are H×W tiles in a near-square grid of
cols = ceil(sqrt(S)) columns and rows = ceil(S / cols) rows, filled row by row.
Lanes past C in the last slice, and tiles past S, hold zeros.

Example: C = 10, H = 3, W = 4  →  S = 3 slices, 2×2 grid, one tile empty::

    texture x →   0   1   2   3 | 4   5   6   7
    y = 0       +---------------+---------------+
        1       |   slice 0     |   slice 1     |
        2       |  ch 0,1,2,3   |  ch 4,5,6,7   |
                +---------------+---------------+
        3       |   slice 2     |   (empty,     |
        4       |  ch 8,9,-,-   |    zeros)     |
        5       |               |               |
                +---------------+---------------+

Texel (x, y) of slice s is at (tx·W + x, ty·H + y) with tx = s mod cols, ty = s div cols.
Texture row y is numpy row y (GL's first row is the first row read and written).
This is the contract of `shaders/common.glsl`; `pack`/`unpack` are its numpy twins.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Atlas:
    """Placement of a (C, H, W) tensor in a texture of `size` = (width, height)."""

    channels: int
    height: int
    width: int

    @property
    def slices(self) -> int:
        return (self.channels + 3) // 4

    @property
    def cols(self) -> int:
        return math.ceil(math.sqrt(self.slices))

    @property
    def rows(self) -> int:
        return math.ceil(self.slices / self.cols)

    @property
    def size(self) -> tuple[int, int]:
        """Texture (width, height) in texels."""
        return self.cols * self.width, self.rows * self.height

    @property
    def shape_uniform(self) -> tuple[int, int, int, int]:
        """The `ivec4` the shaders address this tensor with: (C, H, W, cols)."""
        return self.channels, self.height, self.width, self.cols

    @classmethod
    def of(cls, shape) -> "Atlas":
        c, h, w = (int(v) for v in shape)
        return cls(c, h, w)

    def tile_origin(self, s: int) -> tuple[int, int]:
        """(x, y) texel of the corner of slice `s`'s tile."""
        return s % self.cols * self.width, s // self.cols * self.height

    def copy_rects(self, out: "Atlas", moves, index: int = 0, shift=(0, 0), rects=None) -> list:
        """Append to `rects` (a new list by default) the copies moving whole tiles of this
        atlas into `out`: for each (slice s, output slice d) of `moves`, tile s to the corner
        of tile d shifted by `shift` texels, as (index, source x, source y, output x, output y,
        width, height); a tile right after the last one in a row of both atlases widens it
        (glcnn.runtime.gl.TileCopies runs them)."""
        rects = [] if rects is None else rects
        for s, d in moves:
            (sx, sy), (dx, dy) = self.tile_origin(s), out.tile_origin(d)
            dx, dy = dx + shift[0], dy + shift[1]
            last = rects[-1] if rects else None
            if last and (last[0], last[2], last[4]) == (index, sy, dy) and \
                    (last[1] + last[5], last[3] + last[5]) == (sx, dx):
                rects[-1] = (*last[:5], last[5] + self.width, last[6])
            else:
                rects.append((index, sx, sy, dx, dy, self.width, self.height))
        return rects



@dataclass(frozen=True)
class Blocking:
    """Where a spatially blocked pass writes a (C, H, W) output (shaders/common.glsl,
    "Spatial blocking"): `block_y` × `block_x` pixels per fragment, `step` apart, one render
    target per pixel of the block.

    Each render target holds S = ceil(C / 4) tiles of `tile` = (rows, cols) texels, each cut
    into `bands` horizontal bands of `band_rows` rows (the last one may be short); the S·bands
    bands, band b of slice s being cell v = b·S + s, sit in groups of `group` cells side by
    side (cols apart), the groups in a grid of `grid_cols` columns, `pitch` ≥ group·cols
    texels apart (the columns in between are left empty). Blocked texel
    (by, bx) of tile s, in target j = jy·block_x + jx, holds output pixel (y, x) of slice s with
        y = (by div step)·step·block_y + (by mod step) + jy·step   (x likewise).

    Software rasterisers such as llvmpipe thread over 64×64 screen tiles, so the grid is one
    strip as wide as the texture limit allows, spread towards `min_width` texels (e.g.
    64 × threads) so that even a small layer keeps every core busy. Spread to at most
    `min_width`: one column more would open a mostly empty screen tile that a thread works
    through after the others are done (MobileNetV2 224², 2 threads: 103 -> 99 ms; a 96-channel
    14×14 layer's strip was 144 texels, three tiles, and is now 120, two). The cells of a
    spread strip are packed into one group per thread, the empty columns after each group:
    llvmpipe shades 4-pixel-wide SIMD groups, so an empty gap between every two cells (5
    columns, 3 empty) costs as much as shading it, where a gap of whole SIMD groups costs
    nothing (YOLOv8n's 3×3 convs 64 → 64 at 40²: pitch 8 per 5-column cell, 37 % of the lanes
    idle). A layer with fewer slices than threads (an RGB output) is cut into bands so that it
    still spans a screen tile per thread.

    A band holds at most `band_limit` rows (0: no limit), and the cells run band by band:
    the screen tiles that llvmpipe shades one after another are then the slices of one band,
    which read the same rows of the input while they are in the cache. Plan sets the limit
    for convs whose input is larger than the cache (`Plan._band_limit`).

    The derived sizes are cached (the object is frozen): a pipeline asks for them thousands of
    times while it compiles (MobileNetV2: ≈ 40 ms of a warm load when recomputed).
    """

    shape: tuple[int, int, int]
    block_y: int
    block_x: int
    step: int
    max_width: int = 16384
    min_width: int = 0
    band_limit: int = 0

    @functools.cached_property
    def targets(self) -> int:
        return self.block_y * self.block_x

    @functools.cached_property
    def tile(self) -> tuple[int, int]:
        _, h, w = self.shape
        return (math.ceil(h / (self.step * self.block_y)) * self.step,
                math.ceil(w / (self.step * self.block_x)) * self.step)

    @functools.cached_property
    def bands(self) -> int:
        """Bands per slice tile: 1 unless the slices, each at most 64 rows tall, are fewer than
        the threads `min_width` asks for (64 texels each), then about one per thread; or
        the tile is taller than `band_limit`, then as few as keep each within it."""
        return math.ceil(self.tile[0] / self.band_rows)

    @functools.cached_property
    def band_rows(self) -> int:
        slices, rows = Atlas.of(self.shape).slices, self.tile[0]
        threads = self.min_width // 64
        if slices * math.ceil(rows / 64) < threads:
            rows = math.ceil(rows / math.ceil(threads / slices))
        if 0 < self.band_limit < rows:
            rows = math.ceil(rows / math.ceil(rows / self.band_limit))
        return rows

    @functools.cached_property
    def cells(self) -> int:
        """Grid cells: one per band of every slice."""
        return Atlas.of(self.shape).slices * self.bands

    @functools.cached_property
    def group(self) -> int:
        """Cells side by side in one group: 1 unless the strip is spread (`pitch`), then as
        many as make one group per thread (`min_width` // 64)."""
        cells, cols, threads = self.cells, self.tile[1], self.min_width // 64
        if cells == 1 or cells * cols >= self.min_width or cells <= threads:
            return 1
        return math.ceil(cells / threads)

    @functools.cached_property
    def groups(self) -> int:
        return math.ceil(self.cells / self.group)

    @functools.cached_property
    def pitch(self) -> int:
        """Texels from one group to the next: its cells, spread towards `min_width`."""
        groups, width = self.groups, self.group * self.tile[1]
        if self.cells == 1:  # one tile cannot be spread; empty columns would only cost time
            return width
        spread = self.min_width // groups
        return min(max(width, spread), max(width, self.max_width // groups))

    @functools.cached_property
    def grid_cols(self) -> int:
        """Groups per grid row."""
        return max(1, min(self.groups, self.max_width // self.pitch))

    @functools.cached_property
    def size(self) -> tuple[int, int]:
        """(width, height) of each render target."""
        rows = math.ceil(self.groups / self.grid_cols)
        return self.grid_cols * self.pitch, rows * self.band_rows

    def cell_origin(self, cell: int) -> tuple[int, int]:
        """(x, y) of grid cell `cell`'s first texel (shaders/common.glsl cell_origin)."""
        group, slot = divmod(cell, self.group)
        row, column = divmod(group, self.grid_cols)
        return column * self.pitch + slot * self.tile[1], row * self.band_rows

    @functools.cached_property
    def uniform(self) -> tuple[int, int, int, int]:
        """`u_block` of the shaders: (band rows, tile columns, grid columns, pitch)."""
        return self.band_rows, self.tile[1], self.grid_cols, self.pitch

    @functools.cached_property
    def band_uniform(self) -> tuple[int, int, int]:
        """`u_bands` of the shaders: (bands per tile, tile rows, cells per group)."""
        return self.bands, self.tile[0], self.group

    @functools.cached_property
    def defines(self) -> dict[str, int]:
        return {"BLOCK_Y": self.block_y, "BLOCK_X": self.block_x, "BLOCK_STEP": self.step}

def pack(x: np.ndarray) -> np.ndarray:
    """Lay out a (C, H, W) array as a (tex_height, tex_width, 4) float32 atlas."""
    atlas = Atlas.of(x.shape)
    c, h, w = x.shape
    padded = np.zeros((atlas.rows * atlas.cols * 4, h, w), np.float32)
    padded[:c] = x
    # (rows, cols, 4, H, W) -> (rows, H, cols, W, 4)
    tiles = padded.reshape(atlas.rows, atlas.cols, 4, h, w).transpose(0, 3, 1, 4, 2)
    return np.ascontiguousarray(tiles.reshape(atlas.rows * h, atlas.cols * w, 4))


def unpack(data: np.ndarray, shape) -> np.ndarray:
    """Inverse of `pack`: a (tex_height, tex_width, 4) atlas back to (C, H, W) float32.

    `data` may be taller and wider than the atlas (a Pipeline's textures are, where the
    atlas's sides are powers of two: Compiler.new_image); the texels past it are ignored.
    """
    atlas = Atlas.of(shape)
    c, h, w = atlas.channels, atlas.height, atlas.width
    data = data[:atlas.rows * h, :atlas.cols * w]
    tiles = data.reshape(atlas.rows, h, atlas.cols, w, 4).transpose(0, 2, 4, 1, 3)
    return np.ascontiguousarray(tiles.reshape(-1, h, w)[:c], dtype=np.float32)


def pack_filters(w: np.ndarray, channels: int | None = None) -> np.ndarray:
    """Lay out conv weights (Co, Cg, kh, kw) as a grid of kh×kw filter tiles.

    Tile (column c, row s) holds the taps of input channel c for output slice s, one
    RGBA texel per tap with the 4 output channels of the slice in R, G, B, A::

        x → | c=0: kw taps | c=1: kw taps | ... | c=Cg-1 |
        y   +--------------+--------------+     +--------+   rows ky of slice 0
        ↓   |  kh × kw     |              |     |        |
            +--------------+--------------+     +--------+   rows ky of slice 1
            ...

    Texel (c·kw + kx, s·kh + ky) = w[4s : 4s+4, c, ky, kx]. Blitting the texture
    shows every filter as a small image.

    Args:
        w: any (Co, Cg, kh, kw) array or strided view (e.g. a transposed conv's weights
            seen as a conv's); it is read once, straight into the texture layout.
        channels: columns to lay out, ≥ Cg; the extra input channels are zero.
    Returns:
        (S·kh, channels·kw, 4) float32, S = ceil(Co / 4); output channels ≥ Co are zero.
    """
    co, cg, kh, kw = w.shape
    s, channels = (co + 3) // 4, channels or cg
    padding = co % 4 or channels != cg
    out = (np.zeros if padding else np.empty)((s, kh, channels, kw, 4), np.float32)
    # The output seen as (S, 4, channels, kh, kw): one strided copy of w into it.
    target = out.transpose(0, 4, 2, 1, 3)[:, :, :cg]
    full = co // 4
    target[:full] = w[:4 * full].reshape(full, 4, cg, kh, kw)
    if co % 4:
        target[full, :co % 4] = w[4 * full:]
    return out.reshape(filters_shape(co, kh, kw, channels))


def filters_shape(co: int, kh: int, kw: int, channels: int) -> tuple[int, int, int]:
    """The (height, width, 4) `pack_filters` gives for Co outputs, kh×kw taps and `channels`
    columns, without laying anything out."""
    return (co + 3) // 4 * kh, channels * kw, 4


def pack_channels(*rows: np.ndarray) -> np.ndarray:
    """Per-channel parameter vectors (each of length C) as a (len(rows), S, 4) texture.

    Row r, texel s holds rows[r][4s : 4s+4]; used for bias, scale, shift and slopes.
    """
    c = len(rows[0])
    shape = channels_shape(c, len(rows))
    out = np.zeros((len(rows), shape[1] * 4), np.float32)
    for r, values in enumerate(rows):
        out[r, :c] = values
    return out.reshape(shape)


def channels_shape(c: int, rows: int = 1) -> tuple[int, int, int]:
    """The (rows, S, 4) `pack_channels` gives for `rows` vectors of C values."""
    return rows, (c + 3) // 4, 4


def pack_matrix(w: np.ndarray) -> np.ndarray:
    """Lay out a dense layer's (N, K) weights (output n, input k) for 4-wide fetches.

    Output slice s (outputs 4s..4s+3) owns R consecutive texture rows of `row` texels that
    hold its K inputs in order, one RGBA texel per input k with the 4 outputs in R, G, B, A;
    K is zero-padded to R·row. Wrapping keeps a VGG-size K (25088) under the texture limit;
    `row` (a multiple of 4, so an input slice never straddles two rows) makes it near-square::

        x → | k = 0 .. row−1 | ← texel (k mod row, s·R + k div row) = w[4s : 4s+4, k]
        y   +----------------+
        ↓   | k = row ..     |   rows 0 .. R−1: output slice 0
            | ...            |
            +----------------+
            | k = 0 .. row−1 |   rows R .. 2R−1: output slice 1
            ...

    Returns:
        (S·R, row, 4) float32 with S = ceil(N / 4); R = texture height / S.
    """
    n, k = w.shape
    s = _ceil_div(n, 4)
    rows, row = matrix_grid(n, k)
    padded = np.zeros((s * 4, rows * row), np.float32)
    padded[:n, :k] = w
    # (S, 4, R, row) -> (S, R, row, 4)
    tiles = padded.reshape(s, 4, rows, row).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(tiles.reshape(matrix_shape(n, k)))


def matrix_shape(n: int, k: int) -> tuple[int, int, int]:
    """The (height, width, 4) `pack_matrix` gives for an (N, K) matrix, without laying it out."""
    rows, row = matrix_grid(n, k)
    return _ceil_div(n, 4) * rows, row, 4


def matrix_grid(n: int, k: int) -> tuple[int, int]:
    """(R, row) of `pack_matrix` for an (N, K) matrix: texture rows per output slice, and
    texels per row."""
    s, k4 = _ceil_div(n, 4), 4 * _ceil_div(k, 4)
    side = 4 * _ceil_div(math.isqrt(s * k4), 4)  # width of a square texture
    rows = _ceil_div(k4, side)
    return rows, 4 * _ceil_div(_ceil_div(k4, rows), 4)  # as little padding as R rows allow


def texture_side(n: int, limit: int) -> int:
    """The side of a Pipeline texture holding `n` texels of a layout (an atlas, blocked render
    targets, weights, per-channel parameters) in its corner: `n`, or the next size up that is
    not a power of two, within `limit`. The texels past `n` are zero and never read.

    llvmpipe compiles a shader again for each pattern of power-of-two sizes among the
    textures bound to it (its sampler key records, per texture, whether width and height are
    powers of two): MobileNetV2's 1×1 convs came in three patterns of weight and bias texture
    sizes, costing 1.6 s of its cold first run; fast style's 32-channel 256² and 64-channel
    128² atlases (768² and 512²) 0.7 s. Sides that are never powers of two make one pattern.
    """
    side = n
    while side & (side - 1) == 0 and side < limit:  # 1, 2, 4, ...: powers of two
        side += 1
    return side if side & (side - 1) else n


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
