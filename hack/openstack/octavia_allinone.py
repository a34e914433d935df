"""Runs the Octavia API and its v2 worker in one process, so that the fake:// RPC transport connects them."""
import sys
from wsgiref import simple_server

from oslo_config import cfg

from octavia.api import app as api_app
from octavia.controller.queue.v2 import consumer as consumer_v2

app = api_app.setup_app(argv=sys.argv)
worker = consumer_v2.ConsumerService(0, cfg.CONF)
worker.run()

class Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass

srv = simple_server.make_server(cfg.CONF.api_settings.bind_host, cfg.CONF.api_settings.bind_port, app,
                                handler_class=Quiet)
try:
    srv.serve_forever()
finally:
    worker.terminate()
