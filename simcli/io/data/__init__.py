"""Built-in data files (model presets)."""
