"""Tests of `cpci demo`."""
