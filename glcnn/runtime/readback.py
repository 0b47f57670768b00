"""`Readback`: the outputs of one `Pipeline.run(readback="async")` on their way to the CPU."""

from ..errors import GlcnnError


class Readback:
    """Outputs of one `Pipeline.run(readback="async")` on their way to the CPU.

    The download went into the pipeline's pixel buffer objects when run() returned;
    `result()` maps them and returns what run() would have. A later run() reuses those
    buffers, so call result() before running again.
    """

    def __init__(self, pipeline, run: int, batched: bool):
        self.pipeline, self.run, self.batched = pipeline, run, batched

    def result(self):
        """The outputs as numpy, exactly as `run()` returns them.

        Raises:
            GlcnnError: the pipeline ran again (or was released) since this readback began.
        """
        pipe = self.pipeline
        if pipe.released or pipe._runs != self.run:
            raise GlcnnError("Readback.result() after the pipeline ran again or was released; "
                             "the buffers now hold a later run: call result() first")
        pipe.ctx.activate()
        return pipe._outputs({name: pipe._from_texels(name, pipe._pbos[name].read())
                              for name in pipe.graph.outputs}, self.batched)

    def __repr__(self):
        return f"Readback(run {self.run} of {self.pipeline!r})"
