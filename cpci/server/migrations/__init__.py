"""Alembic migrations for the service's tables (bound to `SQLModel.metadata`)."""
