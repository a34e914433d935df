#!/usr/bin/env python3
"""Where each pod of a node-benchmark burst spent its time.

Joins the per-pod file that `make bench-node BENCH_ARGS="-args -bench.node-pods-to=FILE"` writes (one phase's
lines) with the node stand-in's "Pod sandbox up" log lines and raven-node's "Pod plugged" log lines
(.stack/logs/node-standin.log, .stack/logs/raven-node.log), and prints, for each pod, seconds after its create:

  bound      the benchmark saw the pod bound to a node
  sBound     the stand-in saw it bound (from its boundSeenAt, when its log has it)
  annotated  the benchmark saw Raven's port annotation
  sandbox    the stand-in (the runtime) started its sandbox (before the network namespace)
  cni        raven-node began the ADD (the plugin process has reached the daemon)
  wait       raven-node waited for the annotation (s)
  plug       raven-node plugged the veth and the OVS port (s)
  ovn        raven-node waited for ovn-installed (s)
  added      raven-node answered the ADD
  cniRet     the stand-in had the CNI result (its ADD call returned)
  answered   the prober's connection was answered

Usage: node-phases.py PODS_FILE STANDIN_LOG RAVEN_NODE_LOG
"""
import re
import statistics
import sys


def clock(line):
    m = re.match(r'[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)', line)
    return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None


def seconds(s):
    m = re.match(r'([\d.]+)(ns|µs|ms|s)$', s)
    return float(m[1]) * {'ns': 1e-9, 'µs': 1e-6, 'ms': 1e-3, 's': 1}[m[2]]


def fields(line):
    return dict(re.findall(r'(\w+)="?([^" ]+)"?', line))


def time_of_day(s):
    h, m, sec = s.split(':')
    return int(h) * 3600 + int(m) * 60 + float(sec)


def logged(path, message, pods):
    """Yields, for each line of the log at path that carries message and names a pod of pods: the pod's entry,
    the line's fields, and the line's time in seconds after the pod's create."""
    for line in open(path):
        if message not in line:
            continue
        f = fields(line)
        p = pods.get(f.get('pod'))
        if p is not None:
            yield p, f, clock(line) - p['created']


def main(pods_file, standin_log, node_log):
    pods = {}
    for line in open(pods_file):
        if line.startswith('#') or not line.strip():
            continue
        key, created, bound, annotated, _ready, answered = line.split('\t')
        pods[key] = dict(created=time_of_day(created), bound=float(bound) / 1e3,
                         annotated=float(annotated) / 1e3, answered=float(answered) / 1e3)
    for p, f, end in logged(standin_log, 'Pod sandbox up', pods):
        server, cni, netns = seconds(f['server']), seconds(f['cniAdd']), seconds(f['netns'])
        p.update(sandbox=end - server - cni - netns, cniRet=end - server)
        if 'boundSeenAt' in f:
            p['sBound'] = time_of_day(f['boundSeenAt']) - p['created']
    for p, f, end in logged(node_log, 'Pod plugged', pods):
        wait, plug, ovn = seconds(f['portWait']), seconds(f['plug']), seconds(f['ovnInstalledAfter'])
        p.update(cni=end - wait - plug - ovn, wait=wait, plug=plug, ovn=ovn, added=end)
    cols = ['bound', 'sBound', 'annotated', 'sandbox', 'cni', 'wait', 'plug', 'ovn', 'added', 'cniRet', 'answered']
    print('pod'.ljust(12) + ''.join(c.rjust(10) for c in cols))
    for key, p in sorted(pods.items(), key=lambda kv: kv[1]['answered']):
        print(key.split('/')[-1].ljust(12) + ''.join(('%10.2f' % p[c]) if c in p else '         -' for c in cols))
    for name, agg in (('p50', statistics.median), ('max', max)):
        vals = [agg([p[c] for p in pods.values() if c in p]) if any(c in p for p in pods.values()) else None for c in cols]
        print(name.ljust(12) + ''.join(('%10.2f' % v) if v is not None else '         -' for v in vals))


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
