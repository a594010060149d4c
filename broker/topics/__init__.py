"""Topics: the catalog of names, ids, partition counts and configs (catalog.py), and where
partitions go and which manual assignments are allowed (placement.py)."""
