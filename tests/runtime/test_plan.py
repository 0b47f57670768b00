"""glcnn.runtime.plan without GL: a stand-in for the context's limits is all a Plan reads."""

from types import SimpleNamespace

import pytest

from glcnn.errors import TextureSizeError
from glcnn.graph.builder import Builder
from glcnn.layout import Atlas
from glcnn.ops import build_ops
from glcnn.runtime.plan import BLOCK_SHAPE, Plan


def _limits(max_texture_size=16384, max_buffer_texels=1 << 20):
    """The limits of a 2-thread software rasteriser, as Context reports them."""
    return SimpleNamespace(max_texture_size=max_texture_size, spread_width=128,
                           buffer_fits=lambda texels: texels <= max_buffer_texels,
                           renderer="stand-in")


def _plan(graph, strategy="blocked", keep=(), precision="fp32", **limits):
    ops, shapes = build_ops(graph)
    return Plan(graph, ops, shapes, _limits(**limits), precision, strategy, set(keep))


def _chain(depth=4, c=8, size=6):
    b = Builder(seed=3)
    h = b.input("x", (c, size, size))
    for i in range(depth):
        h = b.conv(h, c, 3, padding=1, activation="Tanh", name=f"c{i}")
    return b.build([h])


def test_dead_tensors_lend_their_texture_to_later_ones():
    # c0 is dead once c1 has run, so c2 takes its texture; c1 is read by c2, so c3 (the
    # output, never shared) gets its own; x is an input, never shared.
    plan = _plan(_chain())
    assert plan.texture_of == {"x": "x", "c0": "c0", "c1": "c1", "c2": "c0", "c3": "c3"}
    assert _plan(_chain(), keep=["c0"]).texture_of["c2"] == "c2"


def test_blocked_only_where_the_strategy_says():
    assert _plan(_chain(), strategy="direct").blocking == {}
    plan = _plan(_chain())
    assert set(plan.blocking) == {"c0", "c1", "c2", "c3"}
    assert all((b.block_y, b.block_x) == BLOCK_SHAPE for b in plan.blocking.values())


@pytest.mark.parametrize(("texels", "reads"), [(1 << 20, True), (0, False)])
def test_blocked_convs_read_input_buffers_where_the_gl_allows(texels, reads):
    plan = _plan(_chain(), max_buffer_texels=texels)
    assert all(plan.reads_input_buffer(op, plan.blocked_tensors) == reads for op in plan.ops)
    assert all(("INPUT_BUFFER" in plan.defines(op, plan.blocked_tensors)) == reads
               for op in plan.ops)
    assert all(("WEIGHTS_BUFFER" in plan.defines(op, {})) == reads for op in plan.ops)


def test_sizes_refused_before_any_gl_object():
    graph = _chain(c=64, size=40)
    side = max(Atlas.of((64, 40, 40)).size)
    with pytest.raises(TextureSizeError, match=r"'x'.*this GL allows"):
        _plan(graph, max_texture_size=side - 1).check_sizes(1 << 40)
    with pytest.raises(TextureSizeError, match="over the memory budget"):
        _plan(graph).check_sizes(1 << 20)
    _plan(graph).check_sizes(1 << 40)
