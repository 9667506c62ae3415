"""The GitHub Action's code: `action.yml` runs `python -m cpci action`, which lands here."""

from cpci.action.settings import ActionSettings

__all__ = ["ActionSettings"]
