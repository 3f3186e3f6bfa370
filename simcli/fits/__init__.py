"""Fits: the alpha-beta of each tier, a step's compute and MFU, the spread, the update time, NCCL's constants, and
calibrated profiles built from them. Imports base, comm, step and io."""
