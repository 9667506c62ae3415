"""The wire between the parent and the ranks: the records they exchange and the files they use.

`protocol` names every record, `journal` makes each line durable, `feed` carries the configs to
the ranks, `world_dir` names the files of a world, `rank_exit` says how a rank's process ended,
`rank_errors` builds every `RankError`, `agreement` merges the ranks' views of a config and
`collectives` says which torch.distributed call a rank was in. Both sides import it; it imports
neither. Light on purpose: the torchrun shim imports `rank_exit` and `world_dir` on every launch.
"""
