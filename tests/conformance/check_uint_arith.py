# Recomputes the golden vector tests/conformance/vectors/uint_arith independently, in Python
# integers and numpy, from DETERMINISM.md sections 1 and 2 (modular arithmetic, truncating
# division, x / 0 = 0, fmod(x, 0) = x, the tensor hash), and compares every output hash.
#   /usr/bin/python3 tests/conformance/check_uint_arith.py tests/conformance/vectors/uint_arith
import numpy as np, sys
from vector_check import compare
d = sys.argv[1]
want_all = {}
with np.errstate(all='ignore'):
  for s in ['u8', 'i16', 'u16', 'u32', 'u64']:
    a = np.load(d + '/inputs/a_%s.npy' % s); b = np.load(d + '/inputs/b_%s.npy' % s)
    T = a.dtype
    # Independent of numpy's own integer division: Python integers, truncation, 0 for x / 0.
    def div(x, y):
        if y == 0: return 0
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y >= 0) else -q
    ai = [int(v) for v in a.ravel()]; bi = [int(v) for v in b.ravel()]
    bits = 8 * T.itemsize
    def wrap(v):
        v %= 1 << bits
        return np.array(v, dtype=np.uint64).astype(T) if T.kind == 'u' else np.array(v - (1 << bits) if v >= 1 << (bits - 1) else v, dtype=np.int64).astype(T)
    q = np.array([wrap(div(x, y)) for x, y in zip(ai, bi)], dtype=T).reshape(a.shape)
    r = np.array([wrap(x - div(x, y) * y) for x, y in zip(ai, bi)], dtype=T).reshape(a.shape)
    prod = np.array([wrap(int(np.prod([int(v) for v in row], dtype=object))) for row in b], dtype=T)
    want = {
      'add': a + b, 'sub': a - b, 'mul': a * b, 'div': q, 'fmod': r, 'max': np.maximum(a, b), 'lt': a < b,
      'sum': a.sum(axis=1, dtype=T), 'rmin': (a * b).min(axis=0), 'prod': prod,
    }
    for k, v in want.items():
      want_all[s + '_' + k] = v.astype(T) if k != 'lt' else v
sys.exit(compare(want_all, d) if len(want_all) == 50 else 1)
