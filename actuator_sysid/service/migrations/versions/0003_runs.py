"""Runs and robot-tied logs: a fit's name, tags and run summary (the dashboard's runs table reads them without the
result), and the robot a dataset was uploaded for.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05 11:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("robot_id", sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f("ix_datasets_robot_id"), ["robot_id"], unique=False)
    with op.batch_alter_table("fits", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("tags", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("summary", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fits", schema=None) as batch_op:
        batch_op.drop_column("summary")
        batch_op.drop_column("tags")
        batch_op.drop_column("name")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_datasets_robot_id"))
        batch_op.drop_column("robot_id")
