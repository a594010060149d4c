"""What one node has of its own, whatever it serves: its data dir (lock, meta.properties, atomic
JSON files), its clock, its log set-up, and the lean imports of `kaflet serve`'s start-up."""
