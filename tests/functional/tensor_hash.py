"""The canonical tensor hash of docs/DETERMINISM.md section 2, for the Python tests."""
import hashlib
import struct

import numpy as np

# The wire dtype codes of docs/DETERMINISM.md section 1.
DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.int32): 2, np.dtype(np.int8): 3, np.dtype(np.bool_): 4,
               np.dtype(np.int64): 5, np.dtype(np.uint8): 6, np.dtype(np.int16): 7, np.dtype(np.uint16): 8,
               np.dtype(np.uint32): 9, np.dtype(np.uint64): 10, np.dtype(np.float64): 11,
               np.dtype(np.float16): 12}


def tensor_hash(array, code=None):
    """`code` overrides the dtype code, for dtypes numpy lacks: bf16 (13) held as uint16 bit
    patterns, and f16 (12) given the same way."""
    h = hashlib.sha256(b"consensor.tensor.v1\0")
    h.update(struct.pack("<BB", DTYPE_CODES[array.dtype] if code is None else code, array.ndim))
    for d in array.shape:
        h.update(struct.pack("<Q", d))
    h.update(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()
