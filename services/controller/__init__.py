"""Controller service: the depth and blend controllers (pure modules: the depth, alpha and the per-token
loss weights it blends, ``turn_weights``) and their Ray actor."""
