#!/usr/bin/python3
"""Writes a float16 (or bfloat16) twin of a published float32 ONNX model, to compare Consensor's
16-bit rule with ONNX Runtime on a real architecture:

  /usr/bin/python3 scripts/half_from_published.py IN.onnx OUT.onnx [--bf16]

Every FLOAT initializer and Constant becomes FLOAT16 (numpy's round to nearest even), every
Cast to FLOAT casts to FLOAT16, and the graph's FLOAT inputs and outputs stay FLOAT through a
Cast at each boundary (so the same .npy inputs feed both twins, and `onnx_bench` can time it).
Intermediate value_info is dropped (its types would be stale). Graphs with subgraphs (If,
Loop) are refused. Needs Debian's python3 with numpy and onnx.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def to_half(t, half):
    if t.data_type != TensorProto.FLOAT:
        return t
    values = numpy_helper.to_array(t).astype(np.float32)
    if half == TensorProto.FLOAT16:
        out = numpy_helper.from_array(values.astype(np.float16), t.name)
    else:
        bits = values.view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        out = TensorProto(name=t.name, data_type=TensorProto.BFLOAT16, dims=values.shape)
        out.raw_data = bits.tobytes()
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    half = TensorProto.BFLOAT16 if "--bf16" in sys.argv[3:] else TensorProto.FLOAT16
    model = onnx.load(sys.argv[1])
    g = model.graph
    for n in g.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            sys.exit("%s has a subgraph (%s): not converted" % (sys.argv[1], n.op_type))
    inits = [to_half(t, half) for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value":
                a.t.CopyFrom(to_half(a.t, half))
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = half
    del g.value_info[:]
    boundary = []
    for i in g.input:
        if i.type.tensor_type.elem_type != TensorProto.FLOAT or i.name in {t.name for t in g.initializer}:
            continue
        inner = i.name + "_half"
        for n in g.node:
            for k, name in enumerate(n.input):
                if name == i.name:
                    n.input[k] = inner
        boundary.append(helper.make_node("Cast", [i.name], [inner], to=half, name=inner + "_cast"))
    tail = []
    for o in g.output:
        if o.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = o.name + "_half"
        for n in g.node:
            for k, name in enumerate(n.output):
                if name == o.name:
                    n.output[k] = inner
            for k, name in enumerate(n.input):
                if name == o.name:
                    n.input[k] = inner
        tail.append(helper.make_node("Cast", [inner], [o.name], to=TensorProto.FLOAT, name=o.name + "_cast"))
    nodes = boundary + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(model, sys.argv[2])


if __name__ == "__main__":
    main()
