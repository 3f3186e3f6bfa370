"""Micro-benchmarks with torch.distributed (optional extra: pip install \x27simcli[bench]\x27)."""
