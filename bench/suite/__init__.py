"""The benchmarks, one module each (bench/README.md says how to write one)."""
