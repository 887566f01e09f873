"""Shared by the check_*.py scripts that recompute a golden vector's outputs in numpy.

Each script computes what DETERMINISM.md says every output must be, independently of the
kernels, and hands the arrays to compare(); this reads the vector's expected.txt and compares
the canonical tensor hashes."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "functional"))
from tensor_hash import tensor_hash  # noqa: E402


def expected_outputs(vector_dir):
    """{output name: tensor hash} from the vector's expected.txt."""
    expected = {}
    with open(os.path.join(vector_dir, "expected.txt")) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == "output":
                expected[fields[1]] = fields[2]
    return expected


def compare(want, vector_dir, complete=False):
    """Prints every mismatch and returns the exit code: 0 when every output in `want` hashes to
    expected.txt's value (and, with `complete`, `want` covers every output of expected.txt).
    A value of `want` is an array, or (array of bit patterns, dtype code) for bf16 and f16."""
    expected = expected_outputs(vector_dir)
    matched = 0
    for name, value in want.items():
        array, code = value if isinstance(value, tuple) else (value, None)
        if name not in expected:
            print("MISSING", name, "is not an output of", vector_dir)
        elif tensor_hash(array, code) == expected[name]:
            matched += 1
        else:
            print("MISMATCH", name)
    unchecked = sorted(set(expected) - set(want))
    summary = "%d match, %d differ" % (matched, len(want) - matched)
    print(summary + ("; not recomputed: " + ", ".join(unchecked) if unchecked else ""))
    if complete and unchecked:
        return 1
    return 0 if matched == len(want) and matched > 0 else 1
