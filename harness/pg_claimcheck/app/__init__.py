"""The use cases: what a verb runs, assembled from the layers below (docs/architecture.md)."""
