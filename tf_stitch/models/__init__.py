"""Small models built locally with random weights (nothing is downloaded)."""
