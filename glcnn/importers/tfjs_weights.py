"""The weights of a TF.js layers model: `weightsManifest` groups read from their `.bin` shards.

Each manifest group lists shard files (`paths`, relative to model.json) and weights
(`{name, shape, dtype, quantization?}`); the group's weights lie back to back in the
concatenation of its shards, in manifest order. Stored forms, decoded to float32 as
TF.js's `io.decodeWeights` does:

| manifest entry                                   | bytes per value | value                  |
|--------------------------------------------------|-----------------|------------------------|
| dtype float32                                    | 4               | IEEE float32           |
| dtype float16 (no quantization)                  | 2               | IEEE float16           |
| quantization {dtype: float16}                    | 2               | IEEE float16           |
| quantization {dtype: uint8 / uint16, scale, min} | 1 / 2           | q · scale + min        |
| dtype int32 / bool (never a layer weight)        | 4 / 1           | the number, as float32 |

tfjs-converter writes `{dtype, scale, min, original_dtype}` for affine quantization (the
`min` is nudged so that 0 is exact); TF.js refuses entries without `min` and `scale`, and
so does glcnn. All values are little-endian. Names may carry a ":0" suffix (Keras variable
names), which is dropped.
"""

import math
from pathlib import Path

import numpy as np

from ..errors import ModelFileError, WeightError, quote
from ..limits import memory_budget, mib
from .tfjs_topology import ConfigError, integers

_RAW = {"float32": "<f4", "float16": "<f2", "int32": "<i4", "bool": "u1"}
_QUANTIZED = {"uint8": "u1", "uint16": "<u2", "float16": "<f2"}


def read_weights(model_path: Path, manifest) -> dict[str, np.ndarray]:
    """Every weight of `manifest` (model.json's `weightsManifest`) as float32.

    Args:
        model_path: the model.json file; shard paths are relative to its folder.
        manifest: the parsed `weightsManifest` list.
    Returns:
        weight name (":0" dropped) -> float32 array of its manifest shape.
    Raises:
        ModelFileError: a malformed manifest, weights over the memory budget (checked before
            any shard is read), a missing shard, or shards shorter than the weights they
            must hold (naming the shard files, the weight and both sizes).
        WeightError: a dtype or quantization glcnn cannot decode, naming the weight.
    """
    if not isinstance(manifest, list):
        raise ModelFileError(f"{model_path}: 'weightsManifest' must be a list of groups")
    specs = [_group_specs(model_path, index, group) for index, group in enumerate(manifest)]
    total = sum(math.prod(shape) * 4 for group in specs for _, shape, _ in group)
    if total > memory_budget():
        raise ModelFileError(f"{model_path}: the weights manifest declares {mib(total)} of "
                             f"float32 weights, over the memory budget of "
                             f"{mib(memory_budget())} (GLCNN_MEMORY_BUDGET)")
    weights = {}
    for index, (group, group_specs) in enumerate(zip(manifest, specs)):
        weights.update(_read_group(model_path, index, group, group_specs))
    return weights


def _group_specs(model_path: Path, index: int, group) -> list[tuple[str, tuple, str]]:
    """`_spec` of every weight of one manifest group."""
    if not isinstance(group, dict) or not isinstance(group.get("paths"), list) or \
            not isinstance(group.get("weights"), list):
        raise ModelFileError(f"{model_path}: weightsManifest[{index}] needs 'paths' and "
                             "'weights' lists")
    return [_spec(model_path, spec) for spec in group["weights"]]


def _read_group(model_path: Path, index: int, group, specs) -> dict[str, np.ndarray]:
    # Python ints: no overflow on hostile shapes
    sizes = [math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype in specs]
    data = _group_bytes(model_path, group["paths"], sum(sizes))
    offset, weights = 0, {}
    for spec, (name, shape, dtype), size in zip(group["weights"], specs, sizes):
        count = math.prod(shape)
        if offset + size > len(data):
            raise ModelFileError(
                f"{model_path}: weight {quote(name)} {list(shape)} needs bytes "
                f"{offset}..{offset + size}"
                f" of group {index} but its shards {group['paths']} hold {len(data)} bytes "
                "(a truncated or missing .bin file)")
        raw = np.frombuffer(data, dtype, count, offset).reshape(shape)
        weights[name] = _decode(model_path, name, raw, spec.get("quantization"))
        offset += size
    return weights


def _group_bytes(model_path: Path, paths, needed: int) -> bytes:
    """The first `needed` bytes of the concatenated shards of one group (read relative to
    the model.json folder): a shard is read only as far as the manifest's weights reach."""
    chunks, have = [], 0
    folder = model_path.parent.resolve()
    for shard in paths:
        if have >= needed:
            break
        file = (model_path.parent / str(shard)).resolve()
        # A hostile manifest may point anywhere ('../x', '/dev/zero'): only regular files
        # inside the model's own folder are read.
        if folder not in file.parents:
            raise ModelFileError(f"{model_path}: weight shard {quote(shard)} points outside "
                                 f"{folder}; shards must sit next to model.json")
        if file.exists() and not file.is_file():
            raise ModelFileError(f"{model_path}: weight shard {quote(shard)} is not a regular file")
        try:
            with open(file, "rb") as stream:
                chunks.append(stream.read(needed - have))
            have += len(chunks[-1])
        except OSError as exc:
            raise ModelFileError(f"{model_path}: weight shard {file} cannot be read "
                                 f"({exc.strerror or exc}); it must sit next to model.json"
                                 ) from None
    return b"".join(chunks)


def _spec(model_path: Path, spec) -> tuple[str, tuple, str]:
    """(name, shape, numpy dtype of the stored values) of one manifest entry.

    Raises:
        ModelFileError: a malformed entry.
        WeightError: an unknown dtype or quantization dtype.
    """
    if not isinstance(spec, dict) or not {"name", "shape", "dtype"} <= set(spec):
        raise ModelFileError(f"{model_path}: manifest entry {quote(spec)} needs name, shape, dtype")
    name = str(spec["name"]).removesuffix(":0")
    try:
        shape = integers(spec["shape"], f"weight {quote(name)} shape")
    except ConfigError as exc:
        raise ModelFileError(f"{model_path}: {exc}") from None
    if any(d < 0 for d in shape):
        raise ModelFileError(f"{model_path}: weight {quote(name)} has a negative size "
                             f"{list(shape)}")
    quantization = spec.get("quantization")
    if quantization is None:
        stored = _RAW.get(spec["dtype"])
        kind = f"dtype {quote(spec['dtype'])}"
    else:
        stored = _QUANTIZED.get(quantization.get("dtype"))
        kind = f"quantization dtype {quote(quantization.get('dtype'))}"
    if stored is None:
        raise WeightError(f"{model_path}: weight {quote(name)} has {kind}; glcnn reads float32, "
                          "float16 and uint8/uint16/float16 quantized weights")
    return name, shape, stored


def _decode(model_path: Path, name: str, raw: np.ndarray, quantization) -> np.ndarray:
    """float32 values of `raw`; affine dequantization in float64, as TF.js computes it."""
    if quantization is None or quantization.get("dtype") == "float16":
        return raw.astype(np.float32)
    if "scale" not in quantization or "min" not in quantization:
        raise WeightError(f"{model_path}: weight {quote(name)} is "
                          f"{quantization['dtype']}-quantized "
                          f"without 'scale' and 'min' ({quantization}); tfjs-converter writes "
                          "both and TF.js requires them")
    scale, low = float(quantization["scale"]), float(quantization["min"])
    return (raw.astype(np.float64) * scale + low).astype(np.float32)
