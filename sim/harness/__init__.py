"""Harness scripts that prepare a running simulated cluster for the playbooks, the demo, bench/ and tests:
the package source (build_packages), a local apt mirror (apt_mirror) and the inventory directory (fleet).
"""
