"""Runs octavia-driver-agent (the OVN provider's agent) for the local stack, whose Neutron runs without Keystone."""
import sys

import noauth_neutron  # noqa: F401  before any Octavia configuration is loaded
from octavia.cmd.driver_agent import main  # noqa: E402

sys.argv[0] = "octavia-driver-agent"
sys.exit(main())
