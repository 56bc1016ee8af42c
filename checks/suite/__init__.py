"""The preflight checks: pytest test functions of one fact each, run by ascend_ready.checks.runner.

Each module covers one area (npu, pcie, hccl, os, versions); `host` is parametrized per node.
"""
