"""Lets Octavia 2025.1 and its OVN provider reach the local stack's Neutron, which runs without Keystone.

Both load a keystoneauth plugin from octavia.conf's [neutron] section. Without Keystone the plugin is "none", whose
"endpoint" option collides with the "endpoint" option Octavia and the provider register in [neutron] themselves
(oslo.config's DuplicateOptError). The network endpoint is given by [neutron] endpoint_override instead, so the
plugin's own option is left out. Imported first by the launchers of the stack's Octavia processes."""
from keystoneauth1.loading._plugins import noauth

_options = noauth.NoAuth.get_options


def _without_endpoint(self):
    return [o for o in _options(self) if o.name != "endpoint"]


noauth.NoAuth.get_options = _without_endpoint
