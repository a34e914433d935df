"""Creates Neutron's schema from its models, in a sqlite file or a MariaDB database (faster than the migrations,
which also need ALTER, which sqlite lacks)."""
import sys

import sqlalchemy as sa
from neutron.db.migration.models import head  # noqa: F401  imports every model
from neutron_lib.db import model_base

engine = sa.create_engine(sys.argv[1])
model_base.BASEV2.metadata.create_all(engine)
if engine.dialect.name == "sqlite":
    with engine.connect() as c:
        c.exec_driver_sql("PRAGMA journal_mode=WAL")
