# Recomputes the exact outputs of the golden vector tests/conformance/vectors/f64_arith
# independently in numpy, from DETERMINISM.md sections 1.1, 1.2 and 2 (binary64 with round to
# nearest even, canonical NaN 0x7FF8000000000000, max/min of signed zeros, the tensor hash),
# and compares their hashes. The transcendental outputs (exp, log, tanh, sigmoid, sin, pow)
# go through the f32 detmath and are left to the kernel tests.
#   /usr/bin/python3 tests/conformance/check_f64_arith.py tests/conformance/vectors/f64_arith
import numpy as np, sys
from vector_check import compare
d = sys.argv[1]
CANON = np.array([0x7FF8000000000000], dtype=np.uint64).view(np.float64)[0]
def canon(a):
    a = np.array(a, dtype=np.float64)
    a[np.isnan(a)] = CANON
    return a
a = np.load(d + '/inputs/a.npy'); b = np.load(d + '/inputs/b.npy')
def maxmin(x, y, is_max):
    both_zero = (x == 0) & (y == 0)
    sx, sy = np.signbit(x), np.signbit(y)
    zero = np.where(sx & sy, -0.0, 0.0) if is_max else np.where(sx | sy, -0.0, 0.0)
    r = np.where(x > y, x, y) if is_max else np.where(x < y, x, y)
    r = np.where(both_zero, zero, r)
    return canon(np.where(np.isnan(x) | np.isnan(y), np.nan, r))
with np.errstate(all='ignore'):
    na = canon(-a)  # neg flips the sign bit; then abs clears it; relu(x) = x > 0 ? x : +0
    aa = canon(np.abs(na))
    want = {
        'add': canon(a + b), 'sub': canon(a - b), 'mul': canon(a * b), 'div': canon(a / b),
        'fmod': canon(np.fmod(a, b)), 'max': maxmin(a, b, True), 'min': maxmin(a, b, False),
        'neg_abs_relu': canon(np.where(np.isnan(aa), np.nan, np.where(aa > 0, aa, 0.0))),
        'sqrt': canon(np.sqrt(a)), 'rsqrt': canon(1.0 / np.sqrt(b)), 'floor': canon(np.floor(a)),
        'ceil': canon(np.ceil(a)), 'round': canon(np.rint(a)), 'lt': a < b, 'eq': a == b,
        'where': np.where(a > b, a, b),
    }
sys.exit(compare(want, d))
