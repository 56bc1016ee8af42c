"""How the project reaches and describes its nodes: the inventory and its targets, one transport (SSH or
this machine) for every command run on a node, sessions and their short command (Session.run ->
CommandResult), a job streamed and stopped on many nodes, one become (become.py) for all of them, the
node guard, the job plan and torchrun command line. (The workers' runtime is ascend_ready.runtime.)

Below checks/ and training/, above the common modules: it imports neither (docs/architecture.md).
"""
