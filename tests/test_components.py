"""The components (models/components/) against the real consumers' schemas and classes, and the registry and
families they make: what each component writes must be what Newton 1.8's USD schemas and Isaac Lab 3.0's cfg
classes define (docs/consumer-semantics.md §A.1, §C.3)."""

from __future__ import annotations

import dataclasses

import isaaclab.actuators as isaaclab_actuators
import numpy as np
import pytest

from actuator_sysid.export.isaaclab import BUILTIN, CFG_FIELDS
from actuator_sysid.export.selection import ChosenModel
from actuator_sysid.fitting.fit import envelope
from actuator_sysid.models.components import COMPONENTS, get
from actuator_sysid.models.families import FAMILIES, JOINT_TERMS, ROBOT_TERMS
from actuator_sysid.models.parameters import BY_NAME, PARAMS


def _schema_properties(api: str) -> set[str]:
    """The properties Newton's USD schema plugin defines for an applied API schema."""
    import newton_usd_schemas  # noqa: F401  (registers the Newton schemas with usd-core)
    from pxr import Usd

    definition = Usd.SchemaRegistry().FindAppliedAPIPrimDefinition(api)
    assert definition is not None, f"{api} is not a registered Newton schema"
    return {str(n) for n in definition.GetPropertyNames()}


def _model(fam_name: str, terms: tuple[str, ...] | None = None) -> ChosenModel:
    fam = FAMILIES[fam_name] if terms is None else FAMILIES[fam_name].with_terms(terms)
    params = {n: 2.0 if n == "delay" else 1.5 for n in BY_NAME}
    return ChosenModel(
        "j", fam, params, [-1.0, -0.5, 0.0, 0.5, 1.0] if "position_table" in fam.clamps else None
    )


def test_registry_is_the_components_parameters_in_rank_order() -> None:
    assert [c.rank for c in COMPONENTS] == sorted(c.rank for c in COMPONENTS)
    assert PARAMS == tuple(p for c in COMPONENTS for p in c.defines)
    for fam in FAMILIES.values():  # a family fits what its components declare, and nothing else
        declared = {p for c in fam.components for p in c.params}
        assert set(fam.params) <= declared | set(fam.joint_terms), fam.name
        assert fam.flags == sum(
            c.flag for c in fam.components if c.kind != "joint" or c.switch in fam.joint_terms
        )
    joint = [c for c in COMPONENTS if c.kind == "joint"]
    assert set(JOINT_TERMS) == {p for c in joint if not c.robot_only for p in c.params}
    assert set(ROBOT_TERMS) == {p for c in joint if c.robot_only for p in c.params} == {"friction_upper"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_newton_attributes_are_those_of_newtons_schemas(family: str) -> None:
    """Every API schema and `newton:` attribute a component writes is defined by Newton's schema plugin."""
    m = _model(family, (*FAMILIES[family].joint_terms, "dynamic_friction", "encoder_offset"))
    for comp in m.family.components:
        apis, attrs = comp.newton_actuator(m)
        allowed = set().union(*(_schema_properties(a) for a in apis)) if apis else set()
        assert {f"newton:{a}" for a in attrs} <= allowed, (comp.name, attrs, apis)
        joint = comp.newton_joint(m, True)
        assert {f"newton:{a}" for a in joint} <= _schema_properties("NewtonJointAPI"), (comp.name, joint)


@pytest.mark.parametrize("cls", BUILTIN)
def test_isaaclab_fields_are_fields_of_the_real_cfg_class(cls: str) -> None:
    """The fields a family's components write for its Isaac Lab class are fields of Isaac Lab 3.0's class."""
    real = {f.name for f in dataclasses.fields(getattr(isaaclab_actuators, cls))}
    assert set(CFG_FIELDS[cls]) <= real, set(CFG_FIELDS[cls]) - real


def test_envelope_is_the_intersection_of_the_clamp_windows() -> None:
    """The torque–speed plot's window: the DC-motor lines within the rated effort; a box for max_effort."""
    p = {"saturation_effort": 2.0, "actuator_velocity_limit": 5.0, "actuator_effort_limit": 1.5}
    env = envelope("dcmotor", p, 8.0, 5)
    window = get("dc_motor").envelope(np.array(env["velocity"]), p)
    assert window is not None
    lo, hi = window
    assert env["effort_max"] == pytest.approx(hi.tolist()) and env["effort_min"] == pytest.approx(lo.tolist())
    assert env["effort_max"][3] == pytest.approx(2.0 * (1 - 4.0 / 5.0))  # on the torque–speed line at 4 rad/s
    assert envelope("ideal_pd", p, 8.0, 3)["effort_max"] == [1.5, 1.5, 1.5]
    assert envelope("remotized_pd", {}, 8.0, 3)["effort_max"] == [
        None,
        None,
        None,
    ]  # a position table: no window
