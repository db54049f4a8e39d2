"""The service's routes, one `APIRouter` per area; `create_app` includes `ROUTERS` in this order (the
OpenAPI document lists paths in it). Routes get the app's services as dependencies (service/deps.py) and
their bodies from service/schemas.py; `ROBOTS` (routes/robots.py) is included first."""

from __future__ import annotations

from fastapi import APIRouter

from . import datasets, excitations, exports, figures, fits, fleet, ops, pages, robots

ROUTERS: tuple[APIRouter, ...] = (
    datasets.router,
    excitations.router,
    fits.router,
    exports.router,
    figures.router,
    fleet.router,
    ops.router,
    pages.router,
)

ROBOTS = robots.router

__all__ = ["ROBOTS", "ROUTERS"]
