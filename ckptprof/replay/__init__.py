"""The replay: plan, rank processes, recorder and loading strategies."""
