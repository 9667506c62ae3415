"""GitHub side of cpci: client, PR comment, check run, file-consistency rules."""
