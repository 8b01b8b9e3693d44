"""``npu-zc serve``: a config, lines and zones, events to an MQTT broker, Prometheus metrics, an HTTP API and
a live view, and streams added and removed while it runs (docs/serve.md).

``npu_zc.serve(config)`` runs it until SIGTERM or Ctrl-C; ``Service(config)`` starts and stops it from code.
The MQTT, metrics and HTTP parts need the ``serve`` extra (``pip install 'npu_zc[serve]'``).
"""

from .config import Config, ConfigError, load, parse
from .service import Service, ServiceError, serve

__all__ = ["Config", "ConfigError", "Service", "ServiceError", "load", "parse", "serve"]
