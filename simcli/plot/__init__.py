"""matplotlib figures: the only importer of matplotlib, loaded lazily by the commands that draw. Imports base to io."""
