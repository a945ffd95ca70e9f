"""WAL positions on the wire (the `Lakehouse-LSN` header): defined once, in the client
distribution (lakehouse.lsn), which sends and reads the header too."""

from lakehouse.lsn import LSN_HEADER as LSN_HEADER
from lakehouse.lsn import REQUEST_LSN as REQUEST_LSN
from lakehouse.lsn import WRITTEN as WRITTEN
from lakehouse.lsn import format_lsn as format_lsn
from lakehouse.lsn import note_written as note_written
from lakehouse.lsn import parse_lsn as parse_lsn
