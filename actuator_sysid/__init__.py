"""actuator-sysid: fit actuator models from joint logs and export them to Isaac Lab and Newton."""

__version__ = "0.2.0"
