"""Models: the tiny Qwen3-architecture zoo (tokenizer + checkpoints), its registry and loading code."""
