"""Controller service: the depth and blend controllers (pure modules) and their Ray actor."""
