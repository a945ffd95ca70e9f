"""embedd's lanes on the wire: the route of questions and the timing headers."""

from __future__ import annotations

# The interactive lane's route: search paths of matrixd (and any daemon embedding a
# question) post here; documents go to /v1/embed, the bulk lane. The gateway forwards
# nothing under /internal/, and with auth on embedd takes only the service token here,
# so no outside client can put its texts before everyone's questions.
INTERACTIVE_PATH = "/internal/v1/embed"
LANE_HEADER = "Lakehouse-Embed-Lane"
WAIT_HEADER = "Lakehouse-Embed-Wait-Ms"  # how long the texts waited in their lane
