"""`cpci demo`: the whole loop on one machine, from batched CP runs to the PR comment and the UI."""
