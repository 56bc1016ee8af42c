"""ascend-check: node preflight (parsers of vendor-tool output, the checks, SSH fan-out, reports)."""
