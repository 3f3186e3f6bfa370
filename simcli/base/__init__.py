"""The vocabulary every layer shares: frozen data types and errors, units, range syntax. Imports nothing of simcli."""
