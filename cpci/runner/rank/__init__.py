"""The rank's side: what runs in each process of a world, under torchrun or forked.

Its entry point is `worker`; `plugin.RankPlugin` runs the configs of the world's feed with the
real pytest protocol, `control_plane` agrees on each outcome over the world's store,
`default_group` and `config_state` keep one config from leaking into the next, and
`testcase_adapter` runs torch's harness tests. It imports nothing of the parent's side
(`tests/runner/test_layers.py`).
"""
