"""`lakehouse up`: the whole stack as supervised child processes."""
