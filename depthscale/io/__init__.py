"""I/O: checkpoints and experiment trackers; nothing here imports core/ or model/."""
