"""Built engines: inspector JSON, layer table, why-not-INT8, saved builds, records, comparison, timings."""
