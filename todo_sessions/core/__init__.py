"""The pure core: event models, validation and projections. No I/O, no clock, no randomness."""
