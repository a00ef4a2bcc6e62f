"""What operators see: Prometheus metrics recorded from each flow's results, their HTTP endpoint, and
JSON log lines. Flows hand their result objects over; nothing in a pure module imports this package."""
