"""Alembic environment: run with the connection `db.migrate` passes in, or with a URL for `alembic` itself."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from actuator_sysid.service.db import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Upgrade over the caller's connection (db.migrate) or one made from sqlalchemy.url."""
    conn = config.attributes.get("connection")
    if conn is not None:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("alembic: no connection given and no sqlalchemy.url set; run through db.migrate")
    engine = create_engine(url)
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
