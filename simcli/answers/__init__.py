"""Answers built on predictions: explain, plan, plan best, compare, validate, check, the fits and calibrated
profiles. Imports base, comm, step and io."""
