"""The service's views: read models and the queries that build them, apart from rendering.

`read_models` holds every view's type; one module per page or resource builds it from stored
rows (through `crud`) and verdicts (through `analysis`). The API returns a view as JSON and the
web UI renders the same object as HTML (`api/view_deps.py` hands both the same one).
"""
