"""Comparisons of training methods and their reports: protocols, run layout, figures, pages."""
