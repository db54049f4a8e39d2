"""Excitation design over HTTP: a trajectory to record, with the identifiability it predicts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...datasets.excitation import ExcitationSpec
from ...fitting.design import excitation_with_identifiability
from ..schemas import ERRORS, Problem

router = APIRouter()


@router.post("/api/v1/excitations", tags=["datasets"], responses={422: {"model": Problem}, **ERRORS})
def create_excitation(body: ExcitationSpec) -> dict[str, Any]:
    """Design an excitation within the bounds: canonical CSV text, its JSON sidecar, and the predicted
    identifiability of each requested family's parameters for the stated load, nominal values and noise."""
    text, side, pred = excitation_with_identifiability(body)
    return {"csv": text, "sidecar": side, "identifiability": pred}
