"""Development tooling, off the production path: the demo, its data, the embedded local endpoint and
provisioning of a notifying bucket."""
