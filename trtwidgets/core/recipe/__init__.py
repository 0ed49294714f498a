"""The recipe: the build description, optimization profiles, staleness, the HTML report."""
