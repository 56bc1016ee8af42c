"""The old path of the workers' runtime (device choice, process groups): it is runtime code, not node
access, and lives in common/runtime.py (`ascend_ready.runtime`); this name stays importable."""

from ascend_ready.runtime import *  # noqa: F403
from ascend_ready.runtime import __all__  # noqa: F401
