"""The MiniLM model questions are embedded with: the same weights, 8-bit arithmetic.

The installed model stores each weight matrix as int8 numbers and a float scale per output
column (``Cast`` then ``Mul``). onnxruntime folds them into float32 when it loads the model, so
a question reads 42 MB of float32 weights, and its embedding is bound by memory bandwidth: the
largest single cost of a ``context()`` (``knowledge.retrieval``). :func:`quantised` writes the
same model with each such matrix as a ``MatMulNBits`` node (onnxruntime's contrib operator):
8-bit weights in blocks of BLOCK along the inner dimension, each block given its column's scale
and zero point 128, so the weights are exactly the model's own (10.6 MB read a question);
``accuracy_level`` 4 multiplies them with the activations quantised to 8 bits per block.

Only questions use it. Facts keep the float model (their vectors are stored, and the gate
compares them with thresholds measured on float vectors); a question's vector is only ranked
against them. Measured on this machine, 500 real sentences asked of 10,000 (the recall
benchmark's), exact top-10 of the 8-bit question vector against the float one's:

====== ========= ================ ==========
block  agreement lowest cosine    embedding
====== ========= ================ ==========
16     0.988     0.99971          4.6 ms
32     0.986     0.99947          4.1 ms
64     0.978     0.99897          3.9 ms
128    0.967     0.99780          3.5 ms
float  1         1                6.0 ms
====== ========= ================ ==========

(one question of 8–14 word pieces, one thread.) BLOCK is 32: the sentences a block of 16 adds
are one in 500 for 0.5 ms more, and 64 loses three times as many for 0.2 ms less. An earlier
int8 model for questions quantised activations per tensor or per channel (``quantize_dynamic``):
agreement 0.794 and 0.891, lowest cosine 0.987. At 100k facts ``context()`` went from 14.3 to
12.9 ms p50 (180 questions, interleaved): the question was already embedded beside the first
statement, but streaming four times the weights through the caches slowed the statements too.

``embedding`` keeps this model only when it came within MIN_COSINE of the float model on a probe
sentence and ran it faster (a CPU without 8-bit dot products may not): see
``embedding._load_question_model``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: Weights per block (the operator takes a power of two from 16); see the module docstring.
BLOCK = 32
#: The quantised question vector's least cosine to the float one on the probe sentence: the
#: table's lowest over 500 sentences is 0.9995, so below 0.999 the rewrite went wrong.
MIN_COSINE = 0.999
_ZERO = 128  # int8 weights stored as uint8, shifted by this


def quantised(model_path: Path) -> bytes | None:
    """The model at ``model_path`` with its int8 weight matrices multiplied in 8 bits, as
    bytes for ``onnxruntime.InferenceSession``; None when it has no such matrix (another
    model) or the ``onnx`` package is missing."""
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        return None
    model = onnx.load(str(model_path))
    graph = model.graph
    weights = {tensor.name: tensor for tensor in graph.initializer}
    made_by = {output: node for node in graph.node for output in node.output}
    nodes, added = [], []
    for node in graph.node:
        found = _int8_weights(node, made_by, weights) if node.op_type == "MatMul" else None
        if found is None:
            nodes.append(node)
            continue
        values, scales = found
        inner, columns = values.shape
        blocks = inner // BLOCK
        name = f"{node.name or node.output[0]}.q8"
        packed = (
            (values.astype(np.int16) + _ZERO).astype(np.uint8).T.reshape(columns, blocks, BLOCK)
        )
        added += [
            numpy_helper.from_array(packed, f"{name}.weights"),
            numpy_helper.from_array(np.repeat(scales, blocks), f"{name}.scales"),
            numpy_helper.from_array(np.full(columns * blocks, _ZERO, np.uint8), f"{name}.zeros"),
        ]
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], f"{name}.weights", f"{name}.scales", f"{name}.zeros"],
                list(node.output),
                name=name,
                domain="com.microsoft",
                K=inner,
                N=columns,
                bits=8,
                block_size=BLOCK,
                accuracy_level=4,
            )
        )
    if not added:
        return None
    graph.initializer.extend(added)
    _keep_only_what_is_used(graph, nodes)
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model.SerializeToString()


def _int8_weights(node, made_by, weights) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 [inner, columns], float32 [columns]) when ``node`` multiplies by
    ``Mul(Cast(int8 weights), scale per column)``, in either order of the Mul's inputs."""
    from onnx import numpy_helper

    scaled = made_by.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul":
        return None
    for cast_output, scale_name in (scaled.input, scaled.input[::-1]):
        cast = made_by.get(cast_output)
        if cast is None or cast.op_type != "Cast" or scale_name not in weights:
            continue
        stored = weights.get(cast.input[0])
        if stored is None:
            continue
        values = numpy_helper.to_array(stored)
        scales = numpy_helper.to_array(weights[scale_name]).astype(np.float32).reshape(-1)
        if (
            values.dtype == np.int8
            and values.ndim == 2
            and values.shape[0] % BLOCK == 0
            and scales.shape == (values.shape[1],)
        ):
            return values, scales
    return None


def _keep_only_what_is_used(graph, nodes) -> None:
    """Set ``graph``'s nodes to those of ``nodes`` its outputs need, and drop the weights no
    node reads (the int8 matrices' Cast and Mul, now unread)."""
    needed = {output.name for output in graph.output}
    kept = []
    for node in reversed(nodes):
        if any(output in needed for output in node.output):
            kept.append(node)
            needed.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    used = [tensor for tensor in graph.initializer if tensor.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(used)
