"""Decisions built on predictions: explain, plan (max devices, time to train, solve, best, measure), compare, and
what a band says about a decision. Imports io and below."""
