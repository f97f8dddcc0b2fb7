"""`boundmem bench`: the papers' experiments and performance measurements. Each benchmark module registers its own command."""
