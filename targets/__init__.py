"""Hardware target descriptions (see `dlpc.targets.dlp`)."""
