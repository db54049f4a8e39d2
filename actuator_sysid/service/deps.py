"""The service's shared state, built once per app, and the FastAPI dependencies that hand it to the routes.

`Services.build(settings)` makes the artifact store, repository, job runner, parser pool, robot loader and
metrics; `create_app` (app.py) puts them on `app.state` and its lifespan starts and stops them. Routes ask
for what they use (`repo: Repo`, `storage: Store`, ...) instead of closing over create_app's locals, so a
router module needs nothing from app.py. robots.py reads the same `app.state` attributes.

The dependencies are `async`: each is one attribute read, cheaper on the event loop than the thread hand-off
FastAPI gives a sync dependency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, Request

from .db import DEFAULT_PROJECT, Repository
from .jobs import JobRunner
from .metrics import Metrics
from .parsing import ParserPool
from .robot_loader import RobotLoader
from .settings import Settings
from .storage import Storage


@dataclass(frozen=True)
class Services:
    """What one app's routes share: settings and the long-lived objects made from them."""

    settings: Settings
    storage: Storage
    repo: Repository
    runner: JobRunner
    parser: ParserPool
    robot_loader: RobotLoader
    metrics: Metrics

    @classmethod
    def build(cls, settings: Settings) -> Services:
        """Open the store and database and make the (not yet started) runner and process pools."""
        repo = Repository(settings.database_url)
        storage = Storage(settings.data_dir)
        return cls(
            settings=settings,
            storage=storage,
            repo=repo,
            runner=JobRunner(settings, repo),
            parser=ParserPool(settings.parse_workers, timeout_s=settings.parse_timeout_s, tmp=storage.tmp),
            robot_loader=RobotLoader(1, timeout_s=settings.parse_timeout_s, tmp=storage.tmp),
            metrics=Metrics(repo),
        )

    def attach(self, state: object) -> None:
        """Put every service on `app.state` under its field name (what the dependencies below read)."""
        for name in self.__dataclass_fields__:
            setattr(state, name, getattr(self, name))


async def _settings(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


async def _storage(request: Request) -> Storage:
    return cast(Storage, request.app.state.storage)


async def _repo(request: Request) -> Repository:
    return cast(Repository, request.app.state.repo)


async def _runner(request: Request) -> JobRunner:
    return cast(JobRunner, request.app.state.runner)


async def _parser(request: Request) -> ParserPool:
    return cast(ParserPool, request.app.state.parser)


async def _metrics(request: Request) -> Metrics:
    return cast(Metrics, request.app.state.metrics)


async def _loader(request: Request) -> RobotLoader:
    return cast(RobotLoader, request.app.state.robot_loader)


async def _project(request: Request) -> str | None:
    """The caller's project for reads: None (every project) when auth is off and no token was sent."""
    return cast("str | None", request.state.project)


async def _owner(request: Request) -> str:
    """The project new datasets and fits belong to."""
    return cast("str | None", request.state.project) or DEFAULT_PROJECT


Conf = Annotated[Settings, Depends(_settings)]
Store = Annotated[Storage, Depends(_storage)]
Repo = Annotated[Repository, Depends(_repo)]
Runner = Annotated[JobRunner, Depends(_runner)]
Parser = Annotated[ParserPool, Depends(_parser)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
Loader = Annotated[RobotLoader, Depends(_loader)]
Project = Annotated[str | None, Depends(_project)]
Owner = Annotated[str, Depends(_owner)]
