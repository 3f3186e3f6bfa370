"""One training step over k: compute, DDP buckets, the slowest device, sharded strategies, memory.
Imports base and comm."""
