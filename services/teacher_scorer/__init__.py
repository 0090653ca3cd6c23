"""Teacher scorer: Ray Serve deployment returning the teacher's top-K log-probabilities."""
