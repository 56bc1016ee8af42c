"""ascend-ready: provision, validate and train on Huawei Ascend NPU clusters.

Kept import-free so the simulator's node-side code can import sub-packages with a bare interpreter.
"""

__version__ = "0.1.0"
