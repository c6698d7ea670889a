"""What operators touch: settings (flags and SUBROUTE_* variables), Prometheus metrics, JSON logs, HTTP
endpoints."""
