"""TextWorld games made offline with its own challenge generators (`tw-make`)."""
