"""Robots (issue 16): an uploaded robot model (MJCF / URDF / USD, or a zip with its meshes) and its summary.

Its files are artifact rows with owner_kind "robot"; a whole-robot fit names it in its request (`robot_id`).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 11:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "robots",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("robots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_robots_project"), ["project"], unique=False)
        batch_op.create_index(batch_op.f("ix_robots_created_at"), ["created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("robots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_robots_created_at"))
        batch_op.drop_index(batch_op.f("ix_robots_project"))
    op.drop_table("robots")
