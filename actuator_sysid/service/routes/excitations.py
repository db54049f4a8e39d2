"""Excitation design over HTTP: a trajectory to record, with the identifiability it predicts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...fitting.design import excitation_with_identifiability
from ..deps import Parser
from ..schemas import ERRORS, ExcitationIn, Problem

router = APIRouter()


@router.post(
    "/api/v1/excitations",
    tags=["datasets"],
    responses={422: {"model": Problem}, 503: {"model": Problem}, **ERRORS},
)
async def create_excitation(body: ExcitationIn, parser: Parser) -> dict[str, Any]:
    """Design an excitation within the bounds: canonical CSV text, its JSON sidecar, and the predicted
    identifiability of each requested family's parameters for the stated load, nominal values and noise.

    The body is checked as it is validated (every number bounded, the samples and the prediction's work
    limited: a 422 names the field and the limit); the design runs in a worker process, never in the API
    process."""
    died = RuntimeError("the excitation worker process stopped")  # a crash, not the user's input: a 500
    text, side, pred = await parser.call(
        excitation_with_identifiability, body, name=f"excitation {body.kind}", died=died
    )
    return {"csv": text, "sidecar": side, "identifiability": pred}
