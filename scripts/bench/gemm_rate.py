#!/usr/bin/env python3
"""fp32 matrix-multiply rate of this machine through torch (the physical limit for training)."""
import json
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(threads)
best = 0.0
for n in (1024, 2048):
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    reps = 10
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    best = max(best, 2 * n ** 3 * reps / (time.perf_counter() - start) / 1e9)
print(json.dumps({"threads": threads, "gemm_gflops": best}))
