# Keystone for the local stack (STACK_KEYSTONE=1): sourced by hack/stack.sh.
# sqlite in WAL mode, fernet tokens, the bundled single-threaded server; initialised state is cached.

start_keystone() { # port
  local port=$1 d=$STACK_DIR/keystone
  mkdir -p "$d"
  cat >"$d/keystone.conf" <<CONF
[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///$STACK_DIR/state/keystone.sqlite
[token]
provider = fernet
expiration = 86400
[fernet_tokens]
key_repository = $d/fernet-keys
[fernet_receipts]
key_repository = $d/fernet-receipts
[credential]
key_repository = $d/credential-keys
[cache]
enabled = false
[identity]
password_hash_algorithm = bcrypt
password_hash_rounds = 4
CONF
  local cache=$CACHE_ROOT/keystone-$(os_version python3-keystone | tr -c 'A-Za-z0-9.\n' '_')
  if [[ ! -f $cache/keystone.sqlite ]]; then
    log "initialising Keystone (about 10 s, cached for next time)"
    local km=(keystone-manage --config-file "$d/keystone.conf")
    "${km[@]}" db_sync >"$d/init.log" 2>&1
    sqlite3 "$STACK_DIR/state/keystone.sqlite" 'PRAGMA journal_mode=WAL;' >/dev/null
    "${km[@]}" fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)" >>"$d/init.log" 2>&1
    "${km[@]}" credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)" >>"$d/init.log" 2>&1
    "${km[@]}" bootstrap --bootstrap-password secret --bootstrap-region-id RegionOne \
      --bootstrap-admin-url "http://127.0.0.1:KSPORT/v3/" --bootstrap-public-url "http://127.0.0.1:KSPORT/v3/" \
      --bootstrap-internal-url "http://127.0.0.1:KSPORT/v3/" >>"$d/init.log" 2>&1
    mkdir -p "$cache.tmp"
    sqlite3 "$STACK_DIR/state/keystone.sqlite" ".backup '$cache.tmp/keystone.sqlite'"
    cp -r "$d/fernet-keys" "$d/credential-keys" "$cache.tmp/"
    [[ -d $d/fernet-receipts ]] && cp -r "$d/fernet-receipts" "$cache.tmp/"
    rm -rf "$cache" && mv "$cache.tmp" "$cache"
  else
    cp "$cache/keystone.sqlite" "$STACK_DIR/state/keystone.sqlite"
    cp -r "$cache/fernet-keys" "$cache/credential-keys" "$d/"
    [[ -d $cache/fernet-receipts ]] && cp -r "$cache/fernet-receipts" "$d/"
  fi
  # The catalog holds a placeholder port; point it at this run's port.
  sqlite3 "$STACK_DIR/state/keystone.sqlite" "UPDATE endpoint SET url = replace(url, 'KSPORT', '$port');"
  start keystone env OS_KEYSTONE_CONFIG_FILES="$d/keystone.conf" "$PY" /usr/bin/keystone-wsgi-public --host 127.0.0.1 --port "$port"
}

keystone_token() { # port user password project
  curl -sf -i -H 'Content-Type: application/json' "http://127.0.0.1:$1/v3/auth/tokens" -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"$2\",\"domain\":{\"id\":\"default\"},\"password\":\"$3\"}}},\"scope\":{\"project\":{\"name\":\"$4\",\"domain\":{\"id\":\"default\"}}}}}" |
    awk 'tolower($1)=="x-subject-token:"{print $2}' | tr -d '\r'
}

# keystone_bootstrap KSPORT NEUTRON_PORT OCTAVIA_PORT: catalog, service users and Raven's own project and user.
keystone_bootstrap() {
  local ksport=$1 ks=http://127.0.0.1:$1/v3 tok
  tok=$(keystone_token "$1" admin secret admin)
  [[ -n $tok ]] || die "no Keystone admin token"
  kpost() { curl -sf -H "X-Auth-Token: $tok" -H 'Content-Type: application/json' -X POST "$ks/$1" -d "$2"; }
  kput() { curl -sf -H "X-Auth-Token: $tok" -X PUT "$ks/$1" >/dev/null; }
  local sid svc url iface
  for svc in "network neutron $2" "load-balancer octavia $3"; do
    set -- $svc
    sid=$(kpost services "{\"service\":{\"type\":\"$1\",\"name\":\"$2\"}}" | jq -r .service.id)
    for iface in public internal admin; do
      kpost endpoints "{\"endpoint\":{\"service_id\":\"$sid\",\"interface\":\"$iface\",\"region_id\":\"RegionOne\",\"url\":\"http://127.0.0.1:$3\"}}" >/dev/null
    done
  done
  local admin_role member_role lbm_role service_pid raven_pid uid
  admin_role=$(curl -sf -H "X-Auth-Token: $tok" "$ks/roles?name=admin" | jq -r '.roles[0].id')
  member_role=$(curl -sf -H "X-Auth-Token: $tok" "$ks/roles?name=member" | jq -r '.roles[0].id')
  lbm_role=$(kpost roles '{"role":{"name":"load-balancer_member"}}' | jq -r .role.id)
  service_pid=$(kpost projects '{"project":{"name":"service","domain_id":"default"}}' | jq -r .project.id)
  raven_pid=$(kpost projects '{"project":{"name":"raven","domain_id":"default"}}' | jq -r .project.id)
  for u in neutron octavia; do
    uid=$(kpost users "{\"user\":{\"name\":\"$u\",\"password\":\"secret\",\"domain_id\":\"default\"}}" | jq -r .user.id)
    kput "projects/$service_pid/users/$uid/roles/$admin_role"
  done
  uid=$(kpost users '{"user":{"name":"raven","password":"secret","domain_id":"default"}}' | jq -r .user.id)
  kput "projects/$raven_pid/users/$uid/roles/$member_role"
  kput "projects/$raven_pid/users/$uid/roles/$lbm_role"
  if [[ $OPENSTACK == zed ]]; then
    # Zed's Neutron lets only admins bind a port to a host (binding:host_id) and choose a floating IP's address
    # (externalIPs, loadBalancerIP).
    kput "projects/$raven_pid/users/$uid/roles/$admin_role"
  else
    # On 2025.1 the manager role of the project may pick a floating IP's address
    # (create_floatingip:floating_ip_address), and the stack's Neutron runs Raven's policy override
    # (deploy/openstack/neutron-policy.yaml), which lets raven-port-binder bind the project's ports
    # (binding:host_id): Raven needs neither admin nor the cloud-wide service role (docs/operations.md,
    # "Credentials").
    local role rid
    for role in raven-port-binder manager; do
      rid=$(curl -sf -H "X-Auth-Token: $tok" "$ks/roles?name=$role" | jq -r '.roles[0].id // empty')
      [[ -n $rid ]] || rid=$(kpost roles "{\"role\":{\"name\":\"$role\"}}" | jq -r .role.id)
      kput "projects/$raven_pid/users/$uid/roles/$rid"
    done
  fi
  # An application credential of Raven's user, for the clouds.yaml entry raven-appcred.
  local rtok
  rtok=$(keystone_token "$ksport" raven secret raven)
  APPCRED_ID=$(curl -sf -H "X-Auth-Token: $rtok" -H 'Content-Type: application/json' -X POST "$ks/users/$uid/application_credentials" \
    -d '{"application_credential":{"name":"raven","secret":"appcred-secret"}}' | jq -r .application_credential.id)
  [[ -n $APPCRED_ID && $APPCRED_ID != null ]] || die "could not create Raven's application credential"
}
