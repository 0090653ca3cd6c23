"""The agent's side of an episode: chat format, tool-call parsing, client-side action validation."""
