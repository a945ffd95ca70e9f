"""API keys: their storage in PostgreSQL and vectord's key routes."""
