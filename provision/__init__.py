"""Provisioning data and logic: the compatibility matrix and its resolver (used by the Ansible roles)."""
