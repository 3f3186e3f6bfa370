"""Checks: measured tables held against predictions (validate), a measured curve's OK/LOW/HIGH per size band
(check), a traced step term by term. Imports fits and below."""
