"""The canonical tensor hash of docs/DETERMINISM.md section 2, for the Python tests."""
import hashlib
import struct

import numpy as np

# The wire dtype codes of docs/DETERMINISM.md section 1.
DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.int32): 2, np.dtype(np.int8): 3, np.dtype(np.bool_): 4,
               np.dtype(np.int64): 5, np.dtype(np.uint8): 6, np.dtype(np.int16): 7, np.dtype(np.uint16): 8,
               np.dtype(np.uint32): 9, np.dtype(np.uint64): 10, np.dtype(np.float64): 11}


def tensor_hash(array):
    h = hashlib.sha256(b"consensor.tensor.v1\0")
    h.update(struct.pack("<BB", DTYPE_CODES[array.dtype], array.ndim))
    for d in array.shape:
        h.update(struct.pack("<Q", d))
    h.update(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()
