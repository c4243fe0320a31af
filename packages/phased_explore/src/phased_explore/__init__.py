"""phased_explore (work in progress)."""
