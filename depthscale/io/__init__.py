"""I/O: the workdir's files, leases, checkpoints, trackers and the one atomic writer of every
file a command writes; nothing here imports core/ or model/."""
