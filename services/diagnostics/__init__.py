"""Turn-resolved diagnostics from the paper's Section 4 (pure)."""
