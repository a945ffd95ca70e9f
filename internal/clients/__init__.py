"""Typed clients of the daemons, one per daemon, used by every daemon, the CLI and tools."""
