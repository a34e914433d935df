"""Runs neutron-server for the local stack, with sqlite's "database is locked" treated as a deadlock.

ML2/OVN needs forked workers (api, rpc, maintenance, periodic), so several processes write the one sqlite file.
In WAL mode a transaction that has read and then wants to write after another connection committed fails at
once with "database is locked" (the busy timeout does not apply to it), and Neutron answered such requests
with a 500. Neutron already retries every API operation on a database deadlock (neutron_lib's
retry_db_errors: up to 20 times, with backoff), as it would on MySQL's "Deadlock found"; mapping the sqlite
error to oslo.db's DBDeadlock lets it do the same here.
"""
import sys

from oslo_db.sqlalchemy import exc_filters
from sqlalchemy import exc as sqla_exc

exc_filters.filters("sqlite", sqla_exc.OperationalError, r"^.*database is locked.*")(exc_filters._deadlock_error)

from neutron.cmd.eventlet.server import main  # noqa: E402  after the filter, before any engine exists

sys.argv[0] = "neutron-server"
sys.exit(main())
