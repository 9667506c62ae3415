"""A small example suite: collectives on 2- and 4-rank worlds, run through the batched runner."""
