"""The data sets the benchmarks load: BEIR's SciFact, Cranfield and CISI, the tldr wiki,
LoCoMo (all read from the shared data, never copied into the repository) and synthetic
vectors and texts."""
