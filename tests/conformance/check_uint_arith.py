# Recomputes the golden vector tests/conformance/vectors/uint_arith independently, in Python
# integers and numpy, from DETERMINISM.md sections 1 and 2 (modular arithmetic, truncating
# division, x / 0 = 0, fmod(x, 0) = x, the tensor hash), and compares every output hash.
#   /usr/bin/python3 tests/conformance/check_uint_arith.py tests/conformance/vectors/uint_arith
import hashlib, numpy as np, sys
d = sys.argv[1]
codes = {np.dtype('u1'): 6, np.dtype('<i2'): 7, np.dtype('<u2'): 8, np.dtype('<u4'): 9, np.dtype('<u8'): 10, np.dtype('bool'): 4}
def th(a):
    a = np.ascontiguousarray(a)
    h = b"consensor.tensor.v1\0" + bytes([codes[a.dtype], a.ndim]) + b"".join(int(x).to_bytes(8, 'little') for x in a.shape)
    return hashlib.sha256(h + a.tobytes()).hexdigest()
exp = {}
for line in open(d + '/expected.txt'):
    p = line.split()
    if p[0] == 'output': exp[p[1]] = p[2]
ok = bad = 0
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
      name = s + '_' + k
      if th(v.astype(T) if k != 'lt' else v) == exp[name]: ok += 1
      else: bad += 1; print('MISMATCH', name)
print(ok, "match,", bad, "differ")
sys.exit(1 if bad or ok != 50 else 0)
