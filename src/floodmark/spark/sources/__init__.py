"""Where records come from: a source up to the shuffle (event time in ms, bucket label, the map side), and the
readers (Kafka, JSON-lines files, history in a chosen order, the tick source). Imports nothing on its own: the
tick source's module is unpickled in Spark's planner processes."""
