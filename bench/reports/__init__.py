"""The record drawn from the results files: docs/BENCHMARKS.md, the plots, and the check
that the quoted benchmarks still print what they printed."""
