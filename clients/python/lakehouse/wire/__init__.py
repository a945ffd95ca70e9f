"""The wire structs shared with the server (I/O-free; msgspec)."""
