"""The disk, no networking: partition logs and the __consumer_offsets record formats."""
