"""Results shaped as a search engine's: highlights, one hit per group, facets, diversity and recency (`shaped` plans them around a search)."""
