#!/usr/bin/python3
"""Writes one IS-Net model of the npm package @imgly/background-removal-data as an .onnx file.

  /usr/bin/python3 scripts/imgly_model.py PACKAGE_DIR small|medium OUT.onnx [--side S]

The package (pinned in bench/models/package.json; docs/ONNX.md, "A corpus of published models")
ships each model split into chunks named by their sha256, and dist/resources.json lists, per
resource, the chunks with their byte offsets and the total size. `small` is IS-Net quantized
by onnxruntime's dynamic quantizer (DynamicQuantizeLinear + ConvInteger, uint8 weights),
`medium` the same network in float16 (PyTorch 2.0.1 export, Resize through float32 casts).
Every chunk's sha256 is checked against its name, and the offsets must tile the model exactly;
anything else is an error (exit code 1).

Both graphs fix the input at [1, 3, 1024, 1024], which takes seconds on ONNX Runtime and much
longer on Consensor. --side S (a power of two from 64 to 1024) writes the same weights and nodes
for an S x S input instead: the spatial dimensions of the input and outputs and the constant
heights and widths of the Resize sizes are scaled by S/1024 (`small` has the sizes as
initializers, `medium` concatenates a Constant [H, W] to the Shape-derived [N, C]), and
value_info is dropped. Nothing else changes; the ctest `published_models` runs them this way.
Needs Debian's python3 with numpy and onnx.
"""
import argparse
import hashlib
import json
import os
import sys

FULL_SIDE = 1024


def join_chunks(package_dir, resource):
    dist = os.path.join(package_dir, "dist")
    with open(os.path.join(dist, "resources.json")) as f:
        resources = json.load(f)
    key = "/models/" + resource
    if key not in resources:
        raise ValueError("%s has no %s (it has %s)" % (package_dir, key, ", ".join(sorted(resources))))
    entry = resources[key]
    parts, expected_offset = [], 0
    for chunk in entry["chunks"]:
        start, end = chunk["offsets"]
        if start != expected_offset or end <= start:
            raise ValueError("%s: chunk %s covers [%d, %d), expected it to start at %d"
                             % (key, chunk["hash"], start, end, expected_offset))
        with open(os.path.join(dist, chunk["hash"]), "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != chunk["hash"]:
            raise ValueError("%s: chunk %s does not have the sha256 it is named by" % (key, chunk["hash"]))
        if len(data) != end - start:
            raise ValueError("%s: chunk %s has %d bytes, its offsets say %d" % (key, chunk["hash"], len(data),
                                                                              end - start))
        parts.append(data)
        expected_offset = end
    if expected_offset != entry["size"]:
        raise ValueError("%s: the chunks end at %d, the model has %d bytes" % (key, expected_offset, entry["size"]))
    return b"".join(parts)


def scale_spatial(model_bytes, side):
    """The same graph for a side x side input: every 1024-derived height and width scaled."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(model_bytes)
    g = model.graph
    factor = FULL_SIDE // side

    def scale_dims(value):
        dims = value.type.tensor_type.shape.dim
        if len(dims) != 4:
            raise ValueError("%s is not 4-D" % value.name)
        for d in dims[2:]:
            if d.dim_value % factor:
                raise ValueError("%s: dimension %d is not a multiple of %d" % (value.name, d.dim_value, factor))
            d.dim_value //= factor

    for value in list(g.input) + list(g.output):
        scale_dims(value)
    initializers = {t.name: t for t in g.initializer}
    producers = {out: node for node in g.node for out in node.output}
    scaled = set()

    def scale_sizes(name, resize):
        """Scales the height and width in a Resize's constant sizes: [N, C, H, W], or the [H, W]
        that PyTorch concatenates to a Shape-derived [N, C]."""
        if name in scaled:
            return
        if name in initializers:
            tensor = initializers[name]
        elif name in producers and producers[name].op_type == "Constant":
            tensor = producers[name].attribute[0].t
        elif name in producers and producers[name].op_type == "Concat":
            return scale_sizes(producers[name].input[-1], resize)
        else:
            raise ValueError("Resize %s: its sizes %s are not constant" % (resize, name))
        sizes = numpy_helper.to_array(tensor).copy()
        if sizes.shape not in [(2,), (4,)] or (sizes[-2:] % factor).any():
            raise ValueError("Resize %s: sizes %s cannot be scaled by 1/%d" % (resize, sizes, factor))
        sizes[-2:] //= factor
        tensor.CopyFrom(numpy_helper.from_array(sizes, tensor.name))
        scaled.add(name)

    for node in g.node:
        if node.op_type == "Resize":
            if len(node.input) < 4 or not node.input[3]:
                raise ValueError("Resize %s has no sizes input" % node.name)
            scale_sizes(node.input[3], node.name)
    del g.value_info[:]
    return model.SerializeToString()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package_dir")
    parser.add_argument("resource", choices=["small", "medium"])
    parser.add_argument("out")
    parser.add_argument("--side", type=int, default=FULL_SIDE)
    args = parser.parse_args()
    if args.side not in [64, 128, 256, 512, 1024]:
        parser.error("--side must be a power of two from 64 to 1024, not %d" % args.side)
    try:
        model = join_chunks(args.package_dir, args.resource)
        if args.side != FULL_SIDE:
            model = scale_spatial(model, args.side)
    except (OSError, ValueError, KeyError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    with open(args.out, "wb") as f:
        f.write(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
