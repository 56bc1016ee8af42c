"""The cluster as a cluster: what is judged across nodes (the device-NIC mesh, the rank table)."""
