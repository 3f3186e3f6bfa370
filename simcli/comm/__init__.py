"""What a collective costs: tiers and hops, the textbook formulas, NCCL's pairs and choice, the registries.
Imports base."""
