"""Runs the Octavia API and its v2 worker in one process, so that the fake:// RPC transport connects them.

The API serves each request in a thread of its own, as Octavia does under a production WSGI server: with the OVN
provider one request can take minutes (a load balancer of 100 listeners created or deleted at once), and a
single-threaded server would make every other caller wait behind it."""
import socketserver
import sys
from wsgiref import simple_server

from oslo_config import cfg

import noauth_neutron  # noqa: F401  before any Octavia configuration is loaded

from octavia.api import app as api_app
from octavia.controller.queue.v2 import consumer as consumer_v2

app = api_app.setup_app(argv=sys.argv)
worker = consumer_v2.ConsumerService(0, cfg.CONF)
worker.run()


class Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    request_queue_size = 128


srv = simple_server.make_server(cfg.CONF.api_settings.bind_host, cfg.CONF.api_settings.bind_port, app,
                                server_class=ThreadingServer, handler_class=Quiet)
try:
    srv.serve_forever()
finally:
    worker.terminate()
