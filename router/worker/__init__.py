"""The router worker: the one poll loop that consumes inputs, routes, produces and commits."""
