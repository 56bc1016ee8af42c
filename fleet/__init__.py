"""How the project reaches and describes its nodes: the inventory and its targets, one transport (SSH or
this machine) for every command run on a node, sessions, a job streamed and stopped on many nodes, the
node guard, the job plan and torchrun command line, and the device/backend map.

Below checks/ and training/, above the common modules: it imports neither (docs/architecture.md).
"""
