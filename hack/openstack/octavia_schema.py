"""Creates Octavia's schema in a database (sqlite or MariaDB) from the models and seeds its lookup tables."""
import sys

import sqlalchemy as sa
from sqlalchemy import orm

from octavia.common import constants as c
from octavia.db import base_models
from octavia.db import models as m

engine = sa.create_engine(sys.argv[1])
base_models.BASE.metadata.create_all(engine)
lookups = [
    (c.SUPPORTED_PROVISIONING_STATUSES, m.ProvisioningStatus),
    (c.SUPPORTED_HEALTH_MONITOR_TYPES, m.HealthMonitorType),
    (c.SUPPORTED_LB_ALGORITHMS, m.Algorithm),
    (c.SUPPORTED_PROTOCOLS, m.Protocol),
    (c.SUPPORTED_OPERATING_STATUSES, m.OperatingStatus),
    (c.SUPPORTED_SP_TYPES, m.SessionPersistenceType),
    (c.SUPPORTED_AMPHORA_ROLES, m.AmphoraRoles),
    (c.SUPPORTED_LB_TOPOLOGIES, m.LBTopology),
    (c.SUPPORTED_VRRP_AUTH, m.VRRPAuthMethod),
    (c.SUPPORTED_L7RULE_TYPES, m.L7RuleType),
    (c.SUPPORTED_L7RULE_COMPARE_TYPES, m.L7RuleCompareType),
    (c.SUPPORTED_L7POLICY_ACTIONS, m.L7PolicyAction),
    (c.SUPPORTED_CLIENT_AUTH_MODES, m.ClientAuthenticationMode),
]
with orm.Session(engine) as s:
    for names, cls in lookups:
        for name in names:
            s.add(cls(name=name))
    s.flush()
    s.add(m.FlavorProfile(id=c.NIL_UUID, name='DELETED-PLACEHOLDER', provider_name=c.DELETED, flavor_data='{}'))
    s.flush()
    s.add(m.Flavor(id=c.NIL_UUID, flavor_profile_id=c.NIL_UUID, name='DELETED-PLACEHOLDER', enabled=False,
                   description='Placeholder for DELETED LBs with DELETED flavors'))
    s.flush()
    s.add(m.AvailabilityZoneProfile(id=c.NIL_UUID, name='DELETED-PLACEHOLDER', provider_name=c.DELETED,
                                    availability_zone_data='{}'))
    s.flush()
    s.add(m.AvailabilityZone(availability_zone_profile_id=c.NIL_UUID, name=c.NIL_UUID, enabled=False,
                             description='Placeholder for DELETED LBs with DELETED availability zones'))
    s.commit()
if engine.dialect.name == "sqlite":
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")
