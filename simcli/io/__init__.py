"""Inputs and outputs: profiles and their schema, workloads, users' files, saved tables, CSV/JSON, rich tables.
Imports base, comm and step."""
