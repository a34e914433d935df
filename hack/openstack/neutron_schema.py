"""Creates Neutron's schema from its models, in a sqlite file or a MariaDB database (faster than the migrations,
which also need ALTER, which sqlite lacks), with the rows the migrations would have added: the default security
group rules (Neutron 2023.2 and later), from which every new group gets its egress rules to anywhere."""
import importlib.util
import os.path
import sys

import sqlalchemy as sa
from neutron.db.migration.models import head  # noqa: F401  imports every model
from neutron_lib.db import model_base

engine = sa.create_engine(sys.argv[1])
model_base.BASEV2.metadata.create_all(engine)
tables = model_base.BASEV2.metadata.tables
if "securitygroupdefaultrules" in tables:
    from neutron.db.migration import alembic_migrations
    path = os.path.join(os.path.dirname(alembic_migrations.__file__),
                        "versions/2023.2/expand/c33da356b165_security_group_default_rules.py")
    spec = importlib.util.spec_from_file_location("security_group_default_rules", path)
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    with engine.begin() as c:
        for rule in migration.default_template_rules:
            rule = dict(rule)
            res = c.execute(sa.insert(tables["standardattributes"]).values(
                description=rule.pop("description"), resource_type="securitygroupdefaultrules"))
            rule["standard_attr_id"] = res.inserted_primary_key[0]
            c.execute(sa.insert(tables["securitygroupdefaultrules"]).values(rule))
if engine.dialect.name == "sqlite":
    with engine.connect() as c:
        c.exec_driver_sql("PRAGMA journal_mode=WAL")
