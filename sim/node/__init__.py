"""Node-side half of the simulator: the vendor-tool dispatcher and the shell wrappers that call it."""
