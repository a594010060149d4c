"""Observability: the Prometheus endpoint (/metrics, /healthz, /readyz) and what it exports.

- stats.py: the cheap recorders the request path and storage write into (no prometheus_client);
- errors.py: error codes of response objects, read by walkers compiled from the schemas;
- requests.py: the per-request hook the connection calls after writing a response;
- exporter.py: kafka_exporter's consumer-group and topic metrics, computed when scraped;
- collectors.py: kaflet's own `kaflet_*` families (prometheus_client collectors);
- http.py: the tiny HTTP server on the broker's event loop;
- service.py: wires all of it to a broker.

prometheus_client is imported at the first scrape only: it costs ~0.1 s of start-up.
"""
