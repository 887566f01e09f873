# Recomputes the outputs of the golden vectors tests/conformance/vectors/cumsum and
# cumsum_f64_u8 independently with numpy's cumsum (add.accumulate: the sequential chain of
# DETERMINISM.md 4.6a, in the input's dtype, integers wrapping), NaN canonicalized (1.1, 1.2),
# and compares the tensor hashes of section 2.
#   /usr/bin/python3 tests/conformance/check_cumsum.py tests/conformance/vectors
import os, numpy as np, sys
from vector_check import compare
root = sys.argv[1]
NAN = {np.dtype('<f4'): np.array([0x7FC00000], dtype=np.uint32).view(np.float32)[0],
       np.dtype('<f8'): np.array([0x7FF8000000000000], dtype=np.uint64).view(np.float64)[0]}
def canon(a):
    a = np.array(a)
    if a.dtype in NAN: a[np.isnan(a)] = NAN[a.dtype]
    return a
def cumsum(x, axis, exclusive=False, reverse=False):
    if reverse: x = np.flip(x, axis)
    with np.errstate(all='ignore'):
        y = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:  # shifted by one; the first position is +0
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis)), np.delete(y, -1, axis)], axis)
    if reverse: y = np.flip(y, axis)
    return canon(y)
failed = 0
for name, outputs in {
    'cumsum': lambda i: {'inner': cumsum(i['x'], 2), 'middle_exclusive': cumsum(i['x'], 1, True),
                         'outer_reverse': cumsum(i['x'], 0, False, True),
                         'inner_exclusive_reverse': cumsum(i['x'], 2, True, True), 'specials': cumsum(i['s'], 1),
                         'specials_cols_reverse': cumsum(i['s'], 0, False, True), 'i32': cumsum(i['i'], 1)},
    'cumsum_f64_u8': lambda i: {'f64': cumsum(i['d'], 1), 'f64_exclusive_reverse': cumsum(i['d'], 0, True, True),
                                'u8_reverse': cumsum(i['u'], 0, False, True)},
}.items():
    d = root + '/' + name
    inputs = {k: np.load(d + '/inputs/' + k + '.npy') for k in 'xsidu' if os.path.exists(d + '/inputs/' + k + '.npy')}
    print(name + ': ', end='')
    failed |= compare(outputs(inputs), d, complete=True)
sys.exit(failed)
