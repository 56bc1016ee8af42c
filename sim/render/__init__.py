"""Renderers of vendor-tool outputs (npu-smi, hccn_tool, lspci, ...) from simulated hardware state."""
