"""ascend-train: GRPO, PPO, SFT and reward-model entrypoints on NPU, CUDA or CPU."""
