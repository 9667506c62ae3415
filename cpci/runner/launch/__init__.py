"""How a world's ranks start: the session's launch policy and its fallback (`launcher`),
torchrun (`torchrun`, `shim`), forked ranks (`forked`, `fork_rank`) from the pytest process's
copy (`zygote`) or multiprocessing's fork server (`fork_server`, `preload`, `preload_targets`).

The parent starts worlds through `launcher.Launcher`; the forked rank's entry point runs the
rank's worker. Light on purpose: the torchrun shim (`shim`) starts with the standard library.
"""
