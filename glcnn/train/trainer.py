"""Train a Graph on the GPU: `Trainer(graph, loss=..., optimizer=...)`, `step(x, target)`.

The forward pass is an ordinary `Pipeline` (`trainer.pipeline`, keep="all" so every tensor
stays readable), running on the training weights. The backward pass is the graph of
glcnn/train/backward.py compiled by the same Compiler into passes of its own, reading the
forward pipeline's textures: a Pipeline cannot host it, since it draws some passes several
times adding into their output (weight gradients and the loss are sums over space, cut into
chunks of at most grad_ops.CHUNK_TERMS terms per fragment, and over a batch's samples, added by
blending), and its inputs are another pipeline's textures, weight layouts included (a conv
computing a layer's input gradient reads the layer's filter layout, glcnn/ops/conv.py). Only
the loss texel is read back per step.
"""

import dataclasses

import moderngl
import numpy as np

from ..errors import GlcnnError, ShapeError, quote
from ..graph.graph import Graph
from ..importers.npz import save as save_npz
from ..layout import Atlas, pack, unpack
from ..ops import build_ops
from ..runtime.compiler import Compiler, Unblock
from ..runtime.pipeline import Pipeline
from .backward import (CONVS, LOSS, TARGET, backward_graph, from_layout, graph_weight,
                       unfuse_upsamples, weight_layer)
from .grad_ops import LOSSES, ConvGradWeight
from .lanes import bias_pass, lane_pass
from .optim import Hyper, Slot
from .plan import BackwardPlan, summed_chunks


class _TrainingPipeline(Pipeline):
    """The forward Pipeline of a Trainer: `weights(layer)` gives the training weights, read
    back from the GPU the first time it is asked after a step (Trainer._sync)."""

    trainer = None

    def weights(self, layer: str) -> dict[str, np.ndarray]:
        if self.trainer is not None:
            self.trainer._sync(layer)
        return super().weights(layer)


class Trainer:
    """Train `graph` on the GPU with a mean-reduced loss and a PyTorch optimiser.

    Args:
        graph: Conv, ConvTranspose (fused activations and residual adds included), Relu,
            LeakyRelu, Sigmoid, Tanh, Elu, Add, Concat, MaxPool, AveragePool, Resize,
            Flatten and Gemm (alpha = beta = 1) layers, one output.
        loss: "mse", "l1" or "bce" (mean over every element and sample, as PyTorch's).
        optimizer: "sgd" (momentum, nesterov, weight_decay), "adam" or "adamw" (betas, eps,
            weight_decay), each as PyTorch's.
        ctx: as for Pipeline.
    Raises:
        UnsupportedOpError: a layer this phase cannot train, named. GlcnnError: bad settings.
    """

    def __init__(self, graph: Graph, loss: str = "mse", optimizer: str = "sgd", lr: float = 1e-3,
                 momentum: float = 0.0, nesterov: bool = False, betas=(0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, ctx=None):
        if loss not in LOSSES:
            raise GlcnnError(f"loss {quote(loss)} unknown; expected one of {', '.join(LOSSES)}")
        try:
            self.hyper = Hyper(optimizer, float(lr), float(momentum), bool(nesterov),
                               (float(betas[0]), float(betas[1])), float(eps),
                               float(weight_decay))
        except (TypeError, ValueError, IndexError) as exc:
            raise GlcnnError(f"optimizer settings lr={quote(lr)}, momentum={quote(momentum)}, "
                             f"betas={quote(betas)}, eps={quote(eps)}, weight_decay="
                             f"{quote(weight_decay)}: expected numbers ({exc})") from None
        self.hyper.check()
        graph = unfuse_upsamples(graph)  # glcnn.load's convs reading their input upscaled
        bgraph, self.params = backward_graph(graph, loss)
        self.pipeline = _TrainingPipeline(graph, ctx, "fp32", keep="all")
        self.ctx, self.steps = self.pipeline.ctx, 0
        self._synced: dict[str, int] = {}  # layer -> the step its pipeline copy is from
        self.pipeline.trainer = self
        self.backward, self.passes, self.slots = bgraph, [], []
        # Gradient tensor -> the pass interleaving its lane-blocked render targets into it
        # (drawn by gradients(); the optimisers read the targets).
        self._lanes: dict[str, Unblock] = {}
        self._bindings: list[tuple] = []  # (forward pass, index, its own weight entry)
        # id(pass) -> (dZ's name, the buffer texture it is copied into before the pass, the
        # textures the pass draws with: dZ's the buffer).
        self._grad_buffers: dict[int, tuple] = {}
        try:
            self._compile(bgraph)
        except BaseException:
            self.release()
            raise

    def _compile(self, bgraph: Graph) -> None:
        """The backward passes and the optimiser's slots (see the module docstring)."""
        ops, self.shapes = build_ops(bgraph)
        # The large input-gradient convs blocked as the forward pipeline's (BackwardPlan): 32²
        # autoencoder, 12-13 -> 2.4-4 ms each for its 64↔256-channel ones.
        plan = BackwardPlan(bgraph, ops, self.shapes, self.ctx, "fp32", self.pipeline.strategy,
                            set(self.shapes))
        self._compiler = compiler = Compiler(self.ctx, plan, self.shapes, "fp32", None)
        for name in bgraph.inputs:  # the target's, or the forward pipeline's textures
            layer = weight_layer(name)
            compiler.textures[name] = (compiler.new_texture(name) if name == TARGET
                                       else self.pipeline.weight_texture(layer) if layer
                                       else self.pipeline.texture(name))
            # A forward tensor a blocked forward conv read from a buffer texture is still there
            # (keep="all": no texture is reused): the weight gradient reading it copies nothing.
            buffer = self.pipeline._input_buffers.get(id(compiler.textures[name]))
            if buffer is not None:
                compiler.input_buffers[id(compiler.textures[name])] = buffer
                compiler.buffer_holds[id(buffer)] = name
        compiler.allocate({n.name: n.name for n in bgraph.nodes})
        for op in ops:
            p = compiler.make_pass(op, op.all_textures())
            self.passes.append(p)
            if plan.reads_grad_buffer(op):
                tensor = op.node.inputs[1]
                buffer = compiler.input_buffer(compiler.textures[tensor])
                p.uniforms["u_grad_width"] = buffer.width
                # Copied in before this pass; a later pass reading the same tensor from that
                # buffer (its input-gradient conv) then finds it there (Compiler.buffer_holds).
                compiler.buffer_holds[id(buffer)] = tensor
                self._grad_buffers[id(p)] = (tensor, buffer,
                                             compiler.textures | {tensor: buffer})
            if isinstance(op, ConvGradWeight) and op.lane_blocked():
                self._lanes[op.node.output] = lane_pass(self.ctx, p, compiler)
        # Bias gradients the weight gradient's pass sums (ConvGradWeight.sums_bias): their own
        # pass is not drawn, they are copied out where asked for (as the weight's, _ready).
        skipped = set()
        for p in self.passes:
            if isinstance(p.op, ConvGradWeight) and p.op.sums_bias():
                name = p.op.node.attrs["bias_grad"]
                self._lanes[name] = bias_pass(self.ctx, self._lanes[p.op.node.name],
                                              p.op.bias_row(), compiler.textures[name],
                                              Atlas.of(self.shapes[name]).size)
                skipped.add(name)
        # Unfused gradients (backward.py): drawn by _ready only, copying their input buffer.
        on_demand = set(bgraph.meta["on_demand"])
        self._on_demand = {p.op.node.name: p for p in self.passes if p.op.node.name in on_demand}
        self._previous: dict[str, Slot] = {}  # on-demand input-gradient conv -> its weights
        self._step_passes = [p for p in self.passes if p.op.node.name not in on_demand | skipped]
        for p in self._on_demand.values():
            p.copy_input = p.input_buffer is not None
        chunks = {id(p): summed_chunks(p.op) for p in self.passes}
        self._chunks = {key: rows for key, rows in chunks.items() if rows is not None}
        for param in self.params:
            self.slots.append(self._slot(param, compiler))
        self.ctx.check_error("compiling the backward passes")

    def _rebinder(self, layer: str, sampler: str):
        """A function binding a texture as `layer`'s weight texture `sampler` in the forward
        pipeline (Slot.publish: a bias's new layout is bound, not copied, saving a readback
        and its wait per step and bias; nothing else reads a bias texture)."""
        p = next(p for p in self.pipeline.passes if p.op.node.name == layer)
        index = next(i for i, (s, _) in enumerate(p.weights) if s == sampler)
        self._bindings.append((p, index, p.weights[index]))  # restored by release()

        def rebind(texture):
            p.weights[index] = (sampler, texture)
        return rebind

    def _forward_op(self, layer: str):
        return next(p.op for p in self.pipeline.passes if p.op.node.name == layer)

    def _slot(self, param, compiler) -> Slot:
        op = self._forward_op(param.layer)
        sampler = "u_weights" if param.key == "W" else "u_params"
        data = op.all_textures()[sampler]
        grad, lanes = compiler.textures[param.grad], None
        if param.grad in self._lanes:  # the optimiser reads the lane-blocked targets
            grad, lanes = self._lanes[param.grad].targets, self._lanes[param.grad].uniforms
        if Atlas.of(self.shapes[param.grad]).size != (data.shape[1], data.shape[0]):
            raise GlcnnError(f"layer {quote(param.layer)}: gradient layout "
                             f"{self.shapes[param.grad]} does not match {data.shape}")
        slot = Slot(self.ctx, lambda size: compiler.new_image(size, dtype="f4"), data, grad,
                    self.hyper, self.pipeline.weight_texture(param.layer, sampler),
                    {k: v for k, v in lanes.items() if k != "u_grad"} if lanes else None,
                    self._rebinder(param.layer, sampler) if sampler == "u_params" else None)
        # The input-gradient convs (one per step, and its unfused form drawn on demand).
        readers = [p for p in self.passes if p.op.node.attrs.get("weights_of") == param.layer]
        for dx in readers if param.key == "W" and op.op_type in CONVS else ():
            if dx.op.node.name in self._on_demand:  # the weights its gradient was made with
                self._previous[dx.op.node.name] = slot
                self._share_filters(dx, slot.previous)
            elif dx.op.node.attrs.get("filters_transposed"):
                self._share_filters(dx, self.pipeline.weight_texture(param.layer, sampler))
            else:
                ci, co, cg, cog = op.channels()
                bci, bco, bcg, bcog = dx.op.channels()
                texture = dict(dx.weights)["u_weights"]
                height, width, _ = dx.op.all_texture_shapes()["u_weights"]
                kh, kw = op.W.shape[2:]
                slot.add_transpose(texture, (width, height),
                                   {"u_map": (cg, cog, bco, bcg), "u_kernel": (kw, kh)})
        return slot

    def _share_filters(self, dx, texture, again: bool = False) -> None:
        """Bind `texture` as the filters of input-gradient conv `dx` (which reads that layout
        transposed): the forward pipeline's weight texture, updated in place by each step, or
        for an unfused one drawn on demand the layout before the last step (`again`: rebind)."""
        index = next(i for i, (s, _) in enumerate(dx.weights) if s == "u_weights")
        if type(texture) is not type(dx.weights[index][1]):  # BackwardPlan.buffered: as Plan
            raise GlcnnError(f"{dx.op.node.name}: its filters and the layer's differ in kind")
        if not again:
            self._bindings.append((dx, index, dx.weights[index]))  # restored by release()
        dx.weights[index] = ("u_weights", texture)

    # --- one step ------------------------------------------------------------------------
    def step(self, x, target) -> float:
        """One optimiser step on a batch: gradients of the mean loss over its samples.

        Args:
            x, target: (C, H, W) or (N, C, H, W) arrays (the model input's and output's).
        Returns:
            The loss of the batch before the step (one texel read back).
        Raises:
            ShapeError: shapes that do not match the model or each other.
        """
        xs, ts = self._batch(x, target)
        self.ctx.activate()
        scale = 1.0 / (len(xs) * ts[0].size)
        for p in self.passes:
            if "u_scale" in p.uniforms:
                p.uniforms["u_scale"] = scale
        name = next(iter(self.pipeline.graph.inputs))
        for i, (xi, ti) in enumerate(zip(xs, ts)):
            self.pipeline.upload(name, xi)
            self.pipeline.execute()
            self.upload_target(ti)
            self.run_backward(add=i > 0)
        self.steps += 1
        for slot in self.slots:
            slot.update(self.steps)
        self.ctx.check_error("a training step")
        loss = self._pass(LOSS).fbo.read(viewport=(0, 0, 1, 1), components=4, dtype="f4")
        return float(np.frombuffer(loss, np.float32)[0])

    def upload_target(self, t: np.ndarray) -> None:
        size = Atlas.of(self.shapes[TARGET]).size
        self._compiler.textures[TARGET].write(pack(t.astype(np.float32)).tobytes(),
                                               viewport=(0, 0, *size))

    def run_backward(self, add: bool = False) -> None:
        """Draw the backward passes for the sample in the pipeline's textures; the weight
        gradients and the loss replace what their textures hold (the first sample of a step),
        or with `add` are added to it (blending; no clear needed: 9 clears of the autoencoder's
        textures took ~1 ms a step on llvmpipe)."""
        gl = self.ctx.gl
        for p in self._step_passes:
            chunks = self._chunks.get(id(p))
            textures = self._compiler.textures
            if id(p) in self._grad_buffers:  # dZ read from a buffer texture: copy it there
                tensor, buffer, textures = self._grad_buffers[id(p)]
                buffer.copy_from(self._compiler.textures[tensor])
            if chunks is None:
                p.draw(self.ctx, textures, None)
                continue
            gl.blend_func = moderngl.ONE, moderngl.ONE
            for k, rows in enumerate(chunks):
                if add or k:  # the first chunk of the first sample writes, the rest add
                    gl.enable(moderngl.BLEND)
                if "u_rows" in p.uniforms:  # GemmGradWeight sums nothing: drawn once
                    p.uniforms["u_rows"] = rows
                p.draw(self.ctx, textures, None)
            gl.disable(moderngl.BLEND)
            gl.blend_func = moderngl.DEFAULT_BLENDING

    def _batch(self, x, target):
        xs, ts = np.asarray(x, np.float32), np.asarray(target, np.float32)
        if xs.ndim == 3 and ts.ndim == 3:
            xs, ts = xs[None], ts[None]
        in_shape = tuple(next(iter(self.pipeline.graph.inputs.values())))
        if xs.ndim != 4 or ts.ndim != 4 or len(xs) != len(ts) or len(xs) == 0 or \
                xs.shape[1:] != in_shape or ts.shape[1:] != self.shapes[TARGET]:
            raise ShapeError(f"step(x {xs.shape}, target {ts.shape}): expected (N, "
                             f"{in_shape}) and (N, {self.shapes[TARGET]}), or without N")
        if not (np.isfinite(xs).all() and np.isfinite(ts).all()):
            raise ShapeError("step(): x or target has NaN or Inf values")
        return xs, ts

    def _pass(self, name: str):
        return next(p for p in self.passes if p.op.node.name == name)

    # --- results -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """{"layer.weight": W, "layer.bias": B} in PyTorch's layouts, read from the GPU."""
        self.ctx.activate()
        return {p.torch_name: from_layout(self._forward_op(p.layer), p.key, slot.read())
                for p, slot in zip(self.params, self.slots)}

    def weights(self, layer: str) -> dict[str, np.ndarray]:
        """`layer`'s training weights now, named and shaped as `pipeline.weights` gives them
        (the same: `pipeline.weights(layer)` reads the training weights too)."""
        return self.pipeline.weights(layer)

    def _sync(self, layer: str) -> None:
        """Bring the pipeline's copy of `layer`'s weights (`pipeline.weights`, its node in
        `pipeline.graph`) up to date with the training weights, once per step at most."""
        if self._synced.get(layer) == self.steps or not self.slots:
            return
        self.ctx.activate()
        node = self.pipeline.graph.node(layer)
        for p, slot in zip(self.params, self.slots):
            if p.layer == layer:
                value = from_layout(self._forward_op(layer), p.key, slot.read())
                self.pipeline.set_weights(layer, *graph_weight(node, p.key, value))
        self._synced[layer] = self.steps

    def set_weights(self, layer: str, name: str, array) -> int:
        """Replace weight `name` of `layer` (as `weights` gives it) in the training weights,
        e.g. a bent filter (glcnn.viewer.bending): training goes on from it, the optimiser's
        state (momentum, moments) kept. Returns the texels written, as Pipeline.set_weights.

        Raises:
            As Pipeline.set_weights.
        """
        self.weights(layer)
        written = self.pipeline.set_weights(layer, name, array)
        layouts = self._forward_op(layer).all_textures()
        for p, slot in zip(self.params, self.slots):
            if p.layer == layer:
                layout = layouts["u_weights" if p.key == "W" else "u_params"]
                slot.current.write(np.ascontiguousarray(layout, np.float32),
                                   viewport=(0, 0, slot.width, slot.height))
                slot.publish()
        return written

    def gradients(self) -> dict[str, np.ndarray]:
        """The last step's weight gradients, named and shaped as `state_dict`."""
        self.ctx.activate()
        out = {}
        for p in self.params:
            layout = self._read(p.grad).transpose(1, 2, 0)  # the (4, H, W) tensor's texels
            out[p.torch_name] = from_layout(self._forward_op(p.layer), p.key, layout)
        return out

    def gradient(self, tensor: str) -> np.ndarray:
        """dL/d`tensor` (a forward tensor, not a graph input) of the last sample, (C, H, W)."""
        grads = self.backward.meta["gradients"]
        if tensor not in grads:
            raise GlcnnError(f"no gradient of {quote(tensor)}; there are gradients of "
                             f"{', '.join(map(quote, grads))}")
        return self._read(grads[tensor])

    def gradient_texture(self, name: str):
        """The texture holding the last sample's dL/d`name` for a forward tensor (as `gradient`
        names them), or the last step's gradient of weight `name` ("enc1.weight", as
        `state_dict` names them) in the layer's filter or bias layout (as its weight texture:
        `pipeline.weight_layout` gives its size), for drawing it (the training window's `g`).

        Raises:
            GlcnnError: no such gradient (those there are named).
        """
        self.ctx.activate()
        grads = self.backward.meta["gradients"]
        params = {p.torch_name: p.grad for p in self.params}
        tensor = grads.get(name) or params.get(name)
        if tensor is None:
            raise GlcnnError(f"no gradient of {quote(name)}; there are gradients of "
                             f"{', '.join(map(quote, [*grads, *params]))}")
        return self._ready(tensor)

    def _ready(self, name: str):
        """Backward tensor `name`'s texture, drawn first where a step leaves it undrawn: a
        lane-blocked weight gradient (interleaved), an unfused gradient (backward.py)."""
        if name in self._lanes:
            self._lanes[name].draw(self.ctx)
        elif name in self._on_demand:
            if name in self._previous:  # after a step, its optimiser's other layout
                self._share_filters(self._on_demand[name], self._previous[name].previous, True)
            self._on_demand[name].draw(self.ctx, self._compiler.textures, None)
        return self._compiler.textures[name]

    def _read(self, name: str) -> np.ndarray:
        """Backward tensor `name` as float32 (C, H, W)."""
        tex = self._ready(name)
        data = np.frombuffer(tex.read(), np.float32).reshape(tex.height, tex.width, 4)
        return unpack(data, self.shapes[name])

    def trained_graph(self) -> Graph:
        """A copy of the graph holding the current weights (the caller's is never written)."""
        graph = self.pipeline.graph
        nodes = [dataclasses.replace(n, weights=dict(n.weights)) for n in graph.nodes]
        copy = dataclasses.replace(graph, nodes=nodes, meta=dict(graph.meta))
        state = self.state_dict()
        for p in self.params:
            node = copy.node(p.layer)
            key, value = graph_weight(node, p.key, state[p.torch_name])
            node.weights[key] = value
        return copy

    def save(self, path) -> None:
        """Write the trained model to `path` in glcnn's native .npz format."""
        save_npz(self.trained_graph(), path)

    def release(self) -> None:
        """Free every GL object of the backward passes, the optimiser and the pipeline."""
        self.ctx.activate()
        for p, index, entry in getattr(self, "_bindings", ()):  # the pipeline's own textures
            p.weights[index] = entry
        for slot in self.slots:
            slot.release()
        compiler = getattr(self, "_compiler", None)
        forward = {id(compiler.textures[n]) for n in self.backward.inputs if n != TARGET
                   and compiler and n in compiler.textures}  # the pipeline's to release
        owned = {id(t): t for t in (compiler.textures.values() if compiler else ())
                 if id(t) not in forward}
        for p in self.passes:
            p.vao.release()
            p.fbo.release()
            for _, tex in p.weights:
                tex.release()
        for tex in owned.values():
            tex.release()
        for interleave in self._lanes.values():
            interleave.vao.release()
            interleave.fbo.release()
        for targets in {id(i.targets): i.targets for i in self._lanes.values()}.values():
            targets.release()  # a weight's, shared by its bias
        for buffer in (compiler.input_buffers.values() if compiler else ()):
            if buffer not in self.pipeline._input_buffers.values():  # not the forward's
                buffer.release()
        self.slots, self.passes, self._lanes = [], [], {}
        self.pipeline.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return (f"Trainer({len(self.params)} weights, {len(self.passes)} backward passes, "
                f"{self.hyper.name}, step {self.steps})")

