"""Compares two .npy files as PyTorch's torch.allclose would, and prints how far apart they are.

usage: python3 docs/examples/compare.py ACTUAL.npy EXPECTED.npy [RTOL] [ATOL]   (1e-4, 1e-5)
Exit status 0 when every element is within ATOL + RTOL * |expected|, 1 otherwise.
"""
import sys

import numpy as np

actual, expected = np.load(sys.argv[1]), np.load(sys.argv[2])
rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
atol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
if actual.shape != expected.shape:
    sys.exit(f"shapes differ: {actual.shape} against {expected.shape}")
diff = float(np.max(np.abs(actual.astype(np.float64) - expected)))
close = np.allclose(actual, expected, rtol=rtol, atol=atol)
print(f"{sys.argv[1]}: {actual.shape}, largest difference {diff:.3g}: "
      f"{'match' if close else 'DIFFERENT'} (rtol {rtol:g}, atol {atol:g})")
sys.exit(0 if close else 1)
