"""The wire shapes of every route and their checks, I/O-free: daemons, clients and
/openapi.json import them from here (one shape per request, defined once)."""
