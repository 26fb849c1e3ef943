"""scikit-build-core's dynamic-metadata provider for the wheel's torch requirement (pyproject.toml).

The extension module links the LibTorch of the torch it is built against, and LibTorch's C++ ABI changes between
releases: the wheel requires that release (``torch==X.Y.Z``, which a local build such as ``+cpu`` also satisfies).
"""
from __future__ import annotations

from typing import Any, Mapping


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict:
    try:
        import torch
    except ImportError as e:  # the build runs without isolation, where torch is installed (docs/python.md)
        raise RuntimeError("mtx's wheel is built against the torch of its environment, which has none: "
                           "pip install torch, then pip install --no-build-isolation .") from e
    release = torch.__version__.split("+")[0]
    return {"dependencies": [f"torch=={release}"]}
