"""Initial schema: datasets, fits (the job queue), artifacts, fit events, tokens.

Revision ID: 0001
Revises:
Create Date: 2026-11-30 05:07:05.682612
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("owner_kind", sa.String(length=16), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("owner_kind", "owner_id", "name"),
    )
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_artifacts_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_artifacts_sha256"), ["sha256"], unique=False)

    op.create_table(
        "datasets",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("actuator_model", sa.String(length=255), nullable=True),
        sa.Column("serial", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_datasets_actuator_model"), ["actuator_model"], unique=False)
        batch_op.create_index(batch_op.f("ix_datasets_project"), ["project"], unique=False)
        batch_op.create_index(batch_op.f("ix_datasets_serial"), ["serial"], unique=False)
        batch_op.create_index(batch_op.f("ix_datasets_sha256"), ["sha256"], unique=False)

    op.create_table(
        "fit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fit_id", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("fit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_fit_events_fit_id"), ["fit_id"], unique=False)

    op.create_table(
        "tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tokens_project"), ["project"], unique=False)

    op.create_table(
        "fits",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("dataset_id", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("executor", sa.String(length=16), nullable=True),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("claim", sa.String(length=32), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("fits", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_fits_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_fits_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_fits_project"), ["project"], unique=False)
        batch_op.create_index(batch_op.f("ix_fits_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("fits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_fits_status"))
        batch_op.drop_index(batch_op.f("ix_fits_project"))
        batch_op.drop_index(batch_op.f("ix_fits_dataset_id"))
        batch_op.drop_index(batch_op.f("ix_fits_created_at"))

    op.drop_table("fits")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tokens_project"))

    op.drop_table("tokens")
    with op.batch_alter_table("fit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_fit_events_fit_id"))

    op.drop_table("fit_events")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_datasets_sha256"))
        batch_op.drop_index(batch_op.f("ix_datasets_serial"))
        batch_op.drop_index(batch_op.f("ix_datasets_project"))
        batch_op.drop_index(batch_op.f("ix_datasets_actuator_model"))

    op.drop_table("datasets")
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifacts_sha256"))
        batch_op.drop_index(batch_op.f("ix_artifacts_owner_id"))

    op.drop_table("artifacts")
