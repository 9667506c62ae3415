"""Repositories, their configs and environments: looked up by name, key or fingerprint;
repositories and environments created on first use."""

from __future__ import annotations

import hashlib
import json

from sqlmodel import Session, select

from cpci.schema import Environment
from cpci.server.core.errors import NotFound
from cpci.server.core.provenance import check_repository_id
from cpci.server.crud.common import insert_missing
from cpci.server.models import Config, EnvironmentFingerprint, Repository


def get_repository(*, session: Session, name: str) -> Repository:
    repo: Repository | None = session.exec(
        select(Repository).where(Repository.name == name)
    ).first()
    if repo is None:
        raise NotFound(f"no results for repository {name!r} yet: upload a run first")
    return repo


def get_config(*, session: Session, repo: Repository, key: str) -> Config:
    """A config of `repo` by its key (NODEID@WORLD_SIZE); a 404 saying what keys look like."""
    config: Config | None = session.exec(
        select(Config).where(Config.repository_id == repo.id, Config.key == key)
    ).first()
    if config is None or config.id is None:
        raise NotFound(f"no config {key!r} in {repo.name}; config ids look like NODEID@WORLD_SIZE")
    return config


def ensure_repository(*, session: Session, name: str) -> int:
    insert_missing(
        session=session,
        model=Repository,
        rows=[{"name": name}],
        keys=["name"],
    )
    repo_id: int | None = session.exec(select(Repository.id).where(Repository.name == name)).one()
    assert repo_id is not None
    return repo_id


def bind_github_id(*, session: Session, repo_id: int, claimed: str | None) -> None:
    """Bind the repository to GitHub's numeric id on first sight; Forbidden on a mismatch."""
    repo = session.get_one(Repository, repo_id)
    github_id = check_repository_id(name=repo.name, bound=repo.github_id, claimed=claimed)
    if github_id is not None:
        repo.github_id = github_id
        session.add(repo)
        session.flush()


def fingerprint(environment: Environment) -> str:
    data = environment.model_dump(mode="json")
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def ensure_environment(*, session: Session, environment: Environment) -> int:
    digest = fingerprint(environment)
    row = {"fingerprint": digest, **environment.model_dump()}
    insert_missing(session=session, model=EnvironmentFingerprint, rows=[row], keys=["fingerprint"])
    env_id: int | None = session.exec(
        select(EnvironmentFingerprint.id).where(EnvironmentFingerprint.fingerprint == digest)
    ).one()
    assert env_id is not None
    return env_id


def remember_default_branch(*, session: Session, name: str, branch: str) -> None:
    """Record the default branch GitHub reports for `name` (every webhook payload carries it):
    the trusted branch when CPCI_TRUSTED_BRANCHES is not set (`core.trusted_branches`)."""
    repo_id = ensure_repository(session=session, name=name)
    repo = session.get_one(Repository, repo_id)
    if repo.default_branch != branch:
        repo.default_branch = branch[:255]
        session.add(repo)
        session.flush()
