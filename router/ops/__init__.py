"""What operators touch: settings (flags and SUBROUTE_* variables), Prometheus metrics, JSON logs, HTTP
endpoints, and progress bars on a terminal (for the CLI and Spark work alike)."""
